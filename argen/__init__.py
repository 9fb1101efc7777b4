"""ArGen: align a small instruct LLM as a safe, in-domain healthcare assistant with GRPO."""

__version__ = "0.1.0"
