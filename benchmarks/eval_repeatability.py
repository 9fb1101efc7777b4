"""Do two greedy evaluations of one model give the same responses? bfloat16 against float32.

    python -m benchmarks.eval_repeatability [--processes 2] [--prompts 84] [--new-tokens 256]

Starts `--processes` processes at once (as a sweep's variants share one GPU); each loads the
packaged SmolLM2-135M-Instruct in each precision (`generation.precision`) and generates greedy
responses to the same prompts twice through `argen.generation.generate.generate`, the evaluation
path. Reports, per precision, the share of identical responses within a process and across
processes, the share of characters before the first divergence, and seconds per evaluation (the
first includes compilation and graph capture).
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from argen.config import GenerationConfig
from argen.generation.generate import generate, load_model, pick_device
from argen.models import DEFAULT_MODEL, resolve_model
from benchmarks.engine import matched
from benchmarks.generation import scenario_prompts

PRECISIONS = ("bfloat16", "float32")


def evaluate_twice(n_prompts: int, new_tokens: int) -> dict:
    """Responses and seconds of two greedy evaluations per precision, in this process."""
    prompts = scenario_prompts(n_prompts)
    out = {}
    for precision in PRECISIONS:
        model, tokenizer = load_model(resolve_model(DEFAULT_MODEL), pick_device(), precision)
        settings = GenerationConfig(
            max_new_tokens=new_tokens, batch_size=64, temperature=0.0, precision=precision
        )
        runs = []
        for _ in range(2):
            start = time.perf_counter()
            responses = [g.response for g in generate(model, tokenizer, prompts, settings)]
            runs.append({"seconds": time.perf_counter() - start, "responses": responses})
        out[precision] = runs
        del model
    return out


def compare(processes: list[dict]) -> dict:
    """Within-process, across-process and cross-precision agreement, and evaluation seconds."""
    result = {}
    for precision in PRECISIONS:
        first = [p[precision][0]["responses"] for p in processes]
        result[precision] = {
            "within_process": [
                matched(p[precision][1]["responses"], p[precision][0]["responses"])
                for p in processes
            ],
            "across_processes": [matched(other, first[0]) for other in first[1:]],
            "seconds": [[round(r["seconds"], 2) for r in p[precision]] for p in processes],
        }
    result["bfloat16_vs_float32"] = matched(
        processes[0]["bfloat16"][0]["responses"], processes[0]["float32"][0]["responses"]
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--prompts", type=int, default=84)
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        args.child.write_text(json.dumps(evaluate_twice(args.prompts, args.new_tokens)))
        return
    print(f"device: {torch.cuda.get_device_name() if torch.cuda.is_available() else 'CPU'}")
    with tempfile.TemporaryDirectory() as tmp:
        outs = [Path(tmp) / f"process{i}.json" for i in range(args.processes)]
        command = [sys.executable, "-m", "benchmarks.eval_repeatability"]
        sizes = ["--prompts", str(args.prompts), "--new-tokens", str(args.new_tokens)]
        children = [subprocess.Popen([*command, *sizes, "--child", str(o)]) for o in outs]
        if any(child.wait() for child in children):
            sys.exit("a measuring process failed")
        result = compare([json.loads(o.read_text()) for o in outs])
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
