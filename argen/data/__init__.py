"""Scenario data: sources, validation, deduplication, stratified splits, the data card."""
