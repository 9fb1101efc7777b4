"""GRPO rollouts that depend on nothing but the prompts: the same completions whichever process
samples them, so a run in one process and a run in two can be compared step for step.

Completion ``j`` of a group (its ``j``-th copy of the prompt in a rollout call, modulo the group
size) is a fixed function of the prompt and ``j``: between 3 and ``max_completion_length``
tokens, half of them ending with an end-of-sequence token. `install` puts it in place of the
fast engine's rollouts; a rank process gets it from a ``sitecustomize`` that calls `install`.
"""

import hashlib


def rollouts(tokenizer):
    """A TRL `rollout_func` (the fast engine's signature) with prompt-determined completions."""

    def rollout(prompts: list, trainer) -> dict:
        """Token ids of each prompt (chat template) and of its fixed completion."""
        groups = trainer.num_generations
        eos = min(trainer.eos_token_ids)
        longest = trainer.args.max_completion_length
        seen: dict[str, int] = {}
        prompt_ids, completion_ids = [], []
        for messages in prompts:
            key = repr(messages)
            copy = seen.get(key, 0)
            seen[key] = copy + 1
            digest = hashlib.sha256(f"{key}|{copy % groups}".encode()).digest()
            tokens = [1000 + (b * 7) % 5000 for b in digest[1 : 1 + 3 + digest[0] % (longest - 2)]]
            if digest[31] % 2:
                tokens[-1] = eos
            prompt_ids.append(
                tokenizer.apply_chat_template(
                    messages, add_generation_prompt=True, tokenize=True, return_dict=False
                )
            )
            completion_ids.append(tokens)
        logprobs = [[0.0] * len(c) for c in completion_ids]
        return {"prompt_ids": prompt_ids, "completion_ids": completion_ids, "logprobs": logprobs}

    return rollout


def install() -> None:
    """Train with these rollouts wherever the fast engine's would be used."""
    import argen.training.train

    argen.training.train.engine_rollouts = rollouts
