"""Batched generation against one prompt at a time (how the research code evaluates).

    python -m benchmarks.generation [--prompts 32] [--max-new-tokens 64] [--batch-size 16]
    python -m benchmarks.generation --random-weights   # GPU: a same-shape model, no download

Same model, same greedy settings, same run; prints seconds, tokens/s and the speed-up. With
``--random-weights`` the model is SmolLM2-135M's shape built from its config with random
weights (throughput depends on shapes, not values) and prompts come from the scenario sources.
"""

import argparse
import json
import time
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from argen.config import GenerationConfig
from argen.generation.generate import generate, load_model, pick_device

SHAPE_DIR = Path(__file__).parent / "smollm2_shape"
SHAPES = {
    "135m": {},
    "360m": {
        "hidden_size": 960,
        "intermediate_size": 2560,
        "num_hidden_layers": 32,
        "num_attention_heads": 15,
        "num_key_value_heads": 5,
    },
    "1.7b": {
        "hidden_size": 2048,
        "intermediate_size": 8192,
        "num_hidden_layers": 24,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
    },
}
"""SmolLM2 family shapes (the 135M config with these changes); speed depends on shape only."""


def shape_config(name: str):
    """The config of a SmolLM2 family member by size name."""
    config = AutoConfig.from_pretrained(SHAPE_DIR)
    for key, value in SHAPES[name].items():
        setattr(config, key, value)
    config.head_dim = config.hidden_size // config.num_attention_heads
    return config


def scenario_prompts(n: int) -> list[str]:
    """The first `n` prompts of the clinical and mixed-domain sources (a fixed, varied set)."""
    rows = []
    for name in ("mixed_domain", "clinical"):
        path = Path("data/scenarios") / f"{name}.jsonl"
        rows += [json.loads(line)["prompt"] for line in path.read_text().splitlines()]
    return rows[::3][:n]


def random_model(device: torch.device, shape: str = "135m"):
    """A SmolLM2 family architecture with random weights, and its tokenizer."""
    torch.manual_seed(0)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    with device:
        model = AutoModelForCausalLM.from_config(shape_config(shape), dtype=dtype).eval()
    tokenizer = AutoTokenizer.from_pretrained(SHAPE_DIR)
    tokenizer.padding_side = "left"
    return model, tokenizer


def run(model, tokenizer, prompts, settings) -> tuple[float, int]:
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    start = time.perf_counter()
    out = generate(model, tokenizer, prompts, settings)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - start, sum(g.n_response_tokens for g in out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--random-weights", action="store_true")
    args = parser.parse_args()
    device = pick_device()
    if args.random_weights:
        model, tokenizer = random_model(device)
    else:
        from argen.models import DEFAULT_MODEL, resolve_model

        model, tokenizer = load_model(resolve_model(DEFAULT_MODEL), device)
    prompts = scenario_prompts(args.prompts)
    batched = GenerationConfig(max_new_tokens=args.max_new_tokens, batch_size=args.batch_size)
    single = batched.model_copy(update={"batch_size": 1})
    run(model, tokenizer, prompts[:2], batched)  # warm-up
    name = torch.cuda.get_device_name() if device.type == "cuda" else "CPU"
    print(f"device: {name}; {len(prompts)} prompts, max_new_tokens {args.max_new_tokens}, greedy")
    seconds_b, tokens_b = run(model, tokenizer, prompts, batched)
    print(
        f"batched (batch {args.batch_size}): {seconds_b:.2f} s, {tokens_b} tokens, "
        f"{tokens_b / seconds_b:.1f} tokens/s"
    )
    seconds_s, tokens_s = run(model, tokenizer, prompts, single)
    print(
        f"one at a time: {seconds_s:.2f} s, {tokens_s} tokens, {tokens_s / seconds_s:.1f} tokens/s"
    )
    print(
        f"speed-up: {seconds_s / seconds_b:.2f}x (time), "
        f"{(tokens_b / seconds_b) / (tokens_s / seconds_s):.2f}x (tokens/s)"
    )


if __name__ == "__main__":
    main()
