"""Judges: score (prompt, response) pairs on Ahimsa, Dharma and Helpfulness with ArGen's rubric,
and measure and tune their agreement with reference LLM judges."""
