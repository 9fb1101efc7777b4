"""Reporting: the paired comparison, its report and plots, and the release of a model that
passes."""
