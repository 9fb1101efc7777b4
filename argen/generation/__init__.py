"""Generation: the system prompt and chat format, batched decoding, and the fast engine."""
