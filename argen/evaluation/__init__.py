"""Evaluation: a model's responses to a split, judged, with the signs of judge gaming."""
