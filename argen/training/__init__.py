"""Training: GRPO through TRL with LoRA, its rewards, rollouts, ranks, validation, and the merge."""
