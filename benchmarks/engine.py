"""The fast engine on a GPU: evaluation generation speed, and agreement with transformers.

    python -m benchmarks.engine speed [--shapes 135m] [--prompts 64] [--new-tokens 256]
    python -m benchmarks.engine agreement [--prompts 64] [--new-tokens 128]

`speed` (random weights of SmolLM2 family shapes, greedy, one batch of `--prompts`): plain
batched `generate` (how evaluation ran before), `generate` with transformers' static cache and
its built-in compilation, and the engine; tokens/s, milliseconds per decode step, and the
memory-bandwidth floor (weight bytes / the card's bandwidth). `agreement` (the packaged
SmolLM2-135M weights): greedy tokens of the engine against `generate` of the same weights in
float32 and bfloat16 (share of tokens before the first divergence, identical sequences), and
the engine's sampled log-probabilities against a full forward pass.
"""

import argparse
import json
import time
from pathlib import Path

import torch

from argen.config import GenerationConfig
from argen.engine import Sampling
from argen.generation import _eos_ids, encode_prompts, engine_for, generate, load_model
from benchmarks.generation import random_model, scenario_prompts

BANDWIDTH_TB_S = {"H100": 3.35, "H200": 4.8}


def timed(function) -> tuple[float, object]:
    torch.cuda.synchronize()
    start = time.perf_counter()
    result = function()
    torch.cuda.synchronize()
    return time.perf_counter() - start, result


def static_compiled(model, tokenizer, prompts, new_tokens):
    """`generate` with transformers' static cache (compiled by transformers itself)."""
    padded = tokenizer.pad(
        {"input_ids": encode_prompts(tokenizer, prompts)}, return_tensors="pt", padding=True
    ).to(model.device)
    out = model.generate(
        **padded,
        max_new_tokens=new_tokens,
        do_sample=False,
        cache_implementation="static",
        pad_token_id=tokenizer.pad_token_id,
    )
    return (out[:, padded["input_ids"].shape[1] :] != tokenizer.pad_token_id).sum().item()


def speed(shape: str, n_prompts: int, new_tokens: int) -> list[dict]:
    model, tokenizer = random_model(torch.device("cuda"), shape)
    prompts = scenario_prompts(n_prompts)
    settings = GenerationConfig(max_new_tokens=new_tokens, batch_size=n_prompts)
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    card = next((k for k in BANDWIDTH_TB_S if k in torch.cuda.get_device_name()), None)
    floor_ms = weight_bytes / (BANDWIDTH_TB_S[card] * 1e12) * 1e3 if card else float("nan")
    variants = {
        "transformers": lambda: sum(
            g.n_response_tokens
            for g in generate(
                model, tokenizer, prompts, settings.model_copy(update={"engine": "transformers"})
            )
        ),
        "transformers static+compile": lambda: static_compiled(
            model, tokenizer, prompts, new_tokens
        ),
        "fast": lambda: sum(
            g.n_response_tokens
            for g in generate(
                model, tokenizer, prompts, settings.model_copy(update={"engine": "fast"})
            )
        ),
    }
    rows = []
    for name, run in variants.items():
        try:
            warmup, _ = timed(run)
            seconds, tokens = timed(run)
        except Exception as exc:  # report a variant that cannot run here, keep the others
            print(f"{shape} {name}: failed: {exc!r}", flush=True)
            continue
        rows.append(
            {
                "shape": shape,
                "variant": name,
                "batch": n_prompts,
                "new_tokens": new_tokens,
                "warmup_s": warmup,
                "seconds": seconds,
                "tokens": tokens,
                "tokens_per_s": tokens / seconds,
                "ms_per_step": seconds / new_tokens * 1e3,
                "floor_ms_per_step": floor_ms,
            }
        )
        base = rows[0]["tokens_per_s"]
        print(
            f"{shape} {name}: {seconds:.2f} s (warm-up {warmup:.1f} s), {tokens} tokens, "
            f"{tokens / seconds:.0f} tokens/s (x{tokens / seconds / base:.2f}), "
            f"{seconds / new_tokens * 1e3:.2f} ms/step; floor {floor_ms:.3f} ms/step",
            flush=True,
        )
    return rows


def common_prefix(a: list[int], b: list[int]) -> int:
    return next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )


def agreement(n_prompts: int, new_tokens: int) -> list[dict]:
    from argen.models import DEFAULT_MODEL, resolve_model

    rows = []
    for dtype in (torch.float32, torch.bfloat16):
        model, tokenizer = load_model(resolve_model(DEFAULT_MODEL), torch.device("cuda"))
        model = model.to(dtype)
        prompts = encode_prompts(tokenizer, scenario_prompts(n_prompts))
        eos = sorted(_eos_ids(tokenizer, model))
        engine = engine_for(model)
        greedy = engine.generate(prompts, new_tokens, Sampling(0), eos, tokenizer.pad_token_id)
        padded = tokenizer.pad({"input_ids": prompts}, return_tensors="pt", padding=True)
        with torch.no_grad():
            out = model.generate(
                **padded.to("cuda"), max_new_tokens=new_tokens, do_sample=False, eos_token_id=eos
            )
        reference = out[:, padded["input_ids"].shape[1] :].tolist()
        reference = [
            r[: next((i + 1 for i, t in enumerate(r) if t in eos), len(r))] for r in reference
        ]
        matched = sum(common_prefix(a, b) for a, b in zip(greedy.tokens, reference, strict=True))
        total = sum(len(r) for r in reference)
        identical = sum(a == b for a, b in zip(greedy.tokens, reference, strict=True))
        torch.manual_seed(0)
        sampled = engine.generate(prompts, new_tokens, Sampling(1.0), eos, tokenizer.pad_token_id)
        diffs = []
        for prompt, tokens, logprobs in zip(prompts, sampled.tokens, sampled.logprobs, strict=True):
            ids = torch.tensor([prompt + tokens], device="cuda")
            with torch.no_grad():
                logits = model(ids).logits[0, len(prompt) - 1 : -1].float()
            want = logits.log_softmax(-1).gather(-1, ids[0, len(prompt) :, None])[:, 0]
            diffs.append((torch.tensor(logprobs, device="cuda") - want).abs())
        diffs = torch.cat(diffs)
        row = {
            "dtype": str(dtype).removeprefix("torch."),
            "greedy_tokens_matched_before_divergence": matched / total,
            "identical_sequences": f"{identical}/{len(prompts)}",
            "logprob_abs_diff_mean": diffs.mean().item(),
            "logprob_abs_diff_max": diffs.max().item(),
        }
        print(json.dumps(row), flush=True)
        rows.append(row)
        del model, engine
        torch.cuda.empty_cache()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("mode", choices=["speed", "agreement"])
    parser.add_argument("--shapes", default="135m")
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--new-tokens", type=int, default=None)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    print(f"device: {torch.cuda.get_device_name()}", flush=True)
    if args.mode == "speed":
        rows = [
            row
            for shape in args.shapes.split(",")
            for row in speed(shape, args.prompts, args.new_tokens or 256)
        ]
    else:
        rows = agreement(args.prompts, args.new_tokens or 128)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
