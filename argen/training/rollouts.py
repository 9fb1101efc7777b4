"""GRPO rollouts through the fast engine, plugged into TRL's `GRPOTrainer` as its
`rollout_func`: the same prompts, chat template and sampling settings as TRL's own path."""

from collections.abc import Callable

from argen.errors import ArgenError
from argen.generation.engine import Sampling
from argen.generation.generate import engine_for


def engine_rollouts(tokenizer) -> Callable:
    """A `rollout_func` that samples one completion per prompt with the policy's current weights.

    The engine's copy of the policy (LoRA merged) is refreshed on every call, so each rollout
    uses the weights of the latest optimizer step.
    """

    def rollout(prompts: list, trainer) -> dict:
        args = trainer.args
        if args.min_p is not None or args.repetition_penalty != 1.0:
            raise ArgenError("the fast engine supports temperature, top_p and top_k only")
        engine = engine_for(trainer.accelerator.unwrap_model(trainer.model))
        prompt_ids = [
            tokenizer.apply_chat_template(
                messages, add_generation_prompt=True, tokenize=True, return_dict=False
            )
            for messages in prompts
        ]
        decoded = engine.generate(
            prompt_ids,
            args.max_completion_length,
            Sampling(args.temperature, args.top_p, args.top_k or 0),
            list(trainer.eos_token_ids),
            tokenizer.pad_token_id,
        )
        return {
            "prompt_ids": prompt_ids,
            "completion_ids": decoded.tokens,
            "logprobs": decoded.logprobs,
        }

    return rollout
