"""The fast engine on a GPU: evaluation generation speed, and agreement with transformers.

    python -m benchmarks.engine speed [--shapes 135m] [--prompts 64] [--new-tokens 256]
    python -m benchmarks.engine speed --model SPEC_OR_DIR [--precision float32] [--prompts 84]
    python -m benchmarks.engine agreement [--model SPEC_OR_DIR] [--prompts 64] [--new-tokens 128]

`speed` (greedy, one batch of `--prompts`; random weights of SmolLM2 family shapes in
bfloat16, or with `--model` a real model in `--precision`, default bfloat16): plain batched
`generate` (how evaluation ran before), `generate` with transformers' static cache and its
built-in compilation, and the engine; tokens/s, milliseconds per decode step, and the
memory-bandwidth floor (weight bytes / the card's bandwidth). `agreement` (the packaged
SmolLM2-135M weights, or `--model`): greedy tokens of the engine against `generate` of the same
weights in float32 and bfloat16 (share of tokens before the first divergence, identical
sequences), and the engine's sampled log-probabilities against a full forward pass. `--model`
takes what `argen model` does: a packaged model's name, a local model directory or a hub id.
"""

import argparse
import json
import time
from pathlib import Path

import torch

from argen.config import GenerationConfig
from argen.generation.engine import Sampling, completion_length
from argen.generation.generate import _eos_ids, encode_prompts, engine_for, generate, load_model
from argen.generation.prompting import FULL_SYSTEM_PROMPT
from argen.models import DEFAULT_MODEL, resolve_model
from benchmarks.generation import random_model, scenario_prompts

BANDWIDTH_TB_S = {"H100": 3.35, "H200": 4.8}
DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def timed(function) -> tuple[float, object]:
    torch.cuda.synchronize()
    start = time.perf_counter()
    result = function()
    torch.cuda.synchronize()
    return time.perf_counter() - start, result


def static_compiled(model, tokenizer, prompts, new_tokens):
    """`generate` with transformers' static cache (compiled by transformers itself)."""
    padded = tokenizer.pad(
        {"input_ids": encode_prompts(tokenizer, prompts, FULL_SYSTEM_PROMPT)},
        return_tensors="pt",
        padding=True,
    ).to(model.device)
    out = model.generate(
        **padded,
        max_new_tokens=new_tokens,
        do_sample=False,
        cache_implementation="static",
        pad_token_id=tokenizer.pad_token_id,
    )
    return (out[:, padded["input_ids"].shape[1] :] != tokenizer.pad_token_id).sum().item()


def speed(
    shape: str | None, n_prompts: int, new_tokens: int, model_spec: str | None, precision: str
) -> list[dict]:
    """Generation speed of each variant on random weights of `shape`, or on `model_spec`."""
    if model_spec:
        model, tokenizer = load_model(resolve_model(model_spec), torch.device("cuda"), precision)
        shape = f"{model_spec} {precision}"
    else:
        model, tokenizer = random_model(torch.device("cuda"), shape)
        precision = "bfloat16"
    prompts = scenario_prompts(n_prompts)
    settings = GenerationConfig(
        max_new_tokens=new_tokens, batch_size=n_prompts, precision=precision
    )
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


def greedy_reference(model, tokenizer, prompts, eos, new_tokens) -> list[list[int]]:
    padded = tokenizer.pad({"input_ids": prompts}, return_tensors="pt", padding=True)
    with torch.no_grad():
        out = model.generate(
            **padded.to(DEVICE), max_new_tokens=new_tokens, do_sample=False, eos_token_id=eos
        )
    rows = out[:, padded["input_ids"].shape[1] :].tolist()
    return [r[: completion_length(r, eos)] for r in rows]


def forward_logprobs(model, prompt: list[int], tokens: list[int]) -> torch.Tensor:
    """Log-probabilities of `tokens` after `prompt` from one forward pass (as the trainer)."""
    ids = torch.tensor([prompt + tokens], device=DEVICE)
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt) - 1 : -1].float()
    return logits.log_softmax(-1).gather(-1, ids[0, len(prompt) :, None])[:, 0]


def incremental_logprobs(model, prompt: list[int], tokens: list[int]) -> torch.Tensor:
    """The same log-probabilities from transformers' own KV-cached decoding, token by token."""
    with torch.no_grad():
        out = model(torch.tensor([prompt], device=DEVICE), use_cache=True)
        logits = [out.logits[0, -1]]
        for token in tokens[:-1]:
            out = model(
                torch.tensor([[token]], device=DEVICE),
                past_key_values=out.past_key_values,
                use_cache=True,
            )
            logits.append(out.logits[0, -1])
    logits = torch.stack(logits).float()
    return logits.log_softmax(-1).gather(-1, torch.tensor(tokens, device=DEVICE)[:, None])[:, 0]


def matched(candidate: list[list[int]], reference: list[list[int]]) -> dict:
    """Share of reference tokens before the first divergence, and identical sequences."""
    pairs = list(zip(candidate, reference, strict=True))
    return {
        "tokens_before_divergence": sum(common_prefix(a, b) for a, b in pairs)
        / sum(len(b) for _, b in pairs),
        "identical_sequences": sum(a == b for a, b in pairs) / len(pairs),
    }


def agreement(n_prompts: int, new_tokens: int, model_spec: str) -> dict:
    """Greedy tokens and log-probabilities: engine vs transformers, float32 and bfloat16.

    bfloat16 rounding alone makes two correct implementations diverge, so each bfloat16 figure
    comes with the same figure for transformers' own bfloat16 path against float32. Each
    precision is loaded from the stored weights directly.
    """
    models, tokenizer, model_dir = {}, None, resolve_model(model_spec)
    for precision in ("float32", "bfloat16"):
        model, tokenizer = load_model(model_dir, DEVICE, precision)
        models[getattr(torch, precision)] = model
    prompts = encode_prompts(tokenizer, scenario_prompts(n_prompts), FULL_SYSTEM_PROMPT)
    eos = sorted(_eos_ids(tokenizer, models[torch.float32]))
    pad = tokenizer.pad_token_id
    hf = {d: greedy_reference(m, tokenizer, prompts, eos, new_tokens) for d, m in models.items()}
    engines = {d: engine_for(m) for d, m in models.items()}
    fast = {
        d: e.generate(prompts, new_tokens, Sampling(0), eos, pad).tokens for d, e in engines.items()
    }
    f32, b16 = torch.float32, torch.bfloat16
    result = {
        "greedy": {
            "engine fp32 vs transformers fp32": matched(fast[f32], hf[f32]),
            "engine bf16 vs transformers bf16": matched(fast[b16], hf[b16]),
            "engine bf16 vs transformers fp32": matched(fast[b16], hf[f32]),
            "transformers bf16 vs transformers fp32": matched(hf[b16], hf[f32]),
        }
    }
    torch.manual_seed(0)
    sampled = engines[b16].generate(prompts, new_tokens, Sampling(1.0), eos, pad)
    diffs = {
        "transformers cached decoding bf16 vs trainer bf16 (16 prompts)": [],
        "engine bf16 vs trainer bf16": [],
        "trainer bf16 vs fp32": [],
        "engine fp32 vs trainer fp32": [],
    }
    torch.manual_seed(0)
    sampled32 = engines[f32].generate(prompts, new_tokens, Sampling(1.0), eos, pad)
    for prompt, tokens, logprobs in zip(prompts, sampled.tokens, sampled.logprobs, strict=True):
        bf16 = forward_logprobs(models[b16], prompt, tokens)
        fp32 = forward_logprobs(models[f32], prompt, tokens)
        diffs["engine bf16 vs trainer bf16"].append(
            (torch.tensor(logprobs, device=DEVICE) - bf16).abs()
        )
        diffs["trainer bf16 vs fp32"].append((bf16 - fp32).abs())
        if len(diffs["trainer bf16 vs fp32"]) <= 16:
            cached = incremental_logprobs(models[b16], prompt, tokens)
            diffs["transformers cached decoding bf16 vs trainer bf16 (16 prompts)"].append(
                (cached - bf16).abs()
            )
    for prompt, tokens, logprobs in zip(prompts, sampled32.tokens, sampled32.logprobs, strict=True):
        fp32 = forward_logprobs(models[f32], prompt, tokens)
        diffs["engine fp32 vs trainer fp32"].append(
            (torch.tensor(logprobs, device=DEVICE) - fp32).abs()
        )
    result["logprob_abs_diff"] = {
        name: {"mean": torch.cat(d).mean().item(), "max": torch.cat(d).max().item()}
        for name, d in diffs.items()
    }
    print(json.dumps(result, indent=2), flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("mode", choices=["speed", "agreement"])
    parser.add_argument("--shapes", default="135m")
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--new-tokens", type=int, default=None)
    parser.add_argument(
        "--model",
        default=None,
        help="packaged model name, model directory or hub id (speed: instead of --shapes; "
        f"agreement: default {DEFAULT_MODEL})",
    )
    parser.add_argument(
        "--precision", choices=["bfloat16", "float32"], default="bfloat16", help="speed --model"
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    print(f"device: {torch.cuda.get_device_name() if DEVICE.type == 'cuda' else 'CPU'}", flush=True)
    if args.mode == "speed":
        rows = [
            row
            for shape in ([None] if args.model else args.shapes.split(","))
            for row in speed(
                shape, args.prompts, args.new_tokens or 256, args.model, args.precision
            )
        ]
    else:
        rows = agreement(args.prompts, args.new_tokens or 128, args.model or DEFAULT_MODEL)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
