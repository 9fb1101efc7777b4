"""Judges: score (prompt, response) pairs on Ahimsa, Dharma and Helpfulness with ArGen's rubric."""
