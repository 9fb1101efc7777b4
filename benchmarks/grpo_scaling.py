"""GRPO on one and on two GPUs of one host: step time, completion tokens/s, reward trend.

    PYTHONPATH=. python3 -m benchmarks.grpo_scaling --model DIR [--recipe gpu-qwen0.5b]
        [--steps 20] [--runs 1xB,2xB,2x2B] [--json out.json] [--set KEY=VALUE ...]

Every run is the real training stage (`argen.train.train`; with ``train.num_processes`` 2 it
starts two ranks with accelerate) on the recipe's curated train split, rewarded by the recipe's
judge (the local judge), from the same seed. A run ``NxB`` trains on N GPUs with the recipe's
global batch (``train.prompts_per_step`` x ``train.num_generations`` completions a step),
``Nx2B`` with twice as many prompts a step. Validation and checkpoints are kept out of the way
(one small validation pass before and after, one checkpoint at the end).

From each run's training log: TRL's ``step_time`` (rank 0: rollouts, judging, forward and
backward) and the completions' mean length (over all ranks), hence completion tokens per step
and per second; steps 1 and 2 (CUDA graph capture, allocator warm-up) are left out of the means.
The reward per step, with the slope of a straight line through it, lets the runs' learning be
compared. Prints a table with each run's step time and throughput against ``1xB`` and writes
every figure to ``--json``.
"""

import argparse
import json
import logging
import os
import platform
import re
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from argen.config import load_config
from argen.models import resolve_model
from argen.stages import run_curate
from argen.train import train

log = logging.getLogger("grpo_scaling")
WARM_UP_STEPS = 2


def run_overrides(name: str, base_prompts: int, steps: int, root: Path) -> list[str]:
    """The overrides of one run, ``<processes>x<batch>`` (batch ``B`` or ``2B``)."""
    match = re.fullmatch(r"(\d+)x(\d*)B", name)
    if not match:
        raise SystemExit(f"run {name!r} is not like 2xB or 2x2B")
    processes, times = int(match.group(1)), int(match.group(2) or 1)
    return [
        f"storage.root={root}",
        f"train.num_processes={processes}",
        f"train.prompts_per_step={base_prompts * times}",
        f"train.max_steps={steps}",
        f"train.save_steps={steps}",
        f"train.validation_steps={10 * steps}",
        "train.validation_prompts=8",
        "train.wandb_mode=disabled",
        "judge.cache=false",  # every run judges its own completions
    ]


def summarize(out: Path, completions: int, wall: float) -> dict:
    """One run's figures from its training log and manifest."""
    frame = pd.read_parquet(out / "training_log.parquet")
    steps = frame.dropna(subset=["step_time"]).drop_duplicates("step", keep="last")
    timed = steps[steps["step"] > WARM_UP_STEPS]
    tokens = timed["completions/mean_length"] * completions
    rewards = steps["reward"].to_numpy(dtype=float)
    at = steps["step"].to_numpy(dtype=float)
    slope, intercept = np.polyfit(at, rewards, 1)
    spread = np.sqrt(((rewards - slope * at - intercept) ** 2).sum() / max(len(at) - 2, 1))
    slope_error = spread / np.sqrt(((at - at.mean()) ** 2).sum())
    validation = pd.read_parquet(out / "validation_log.parquet")
    manifest = json.loads((out / "manifest.json").read_text())
    return {
        "completions_per_step": completions,
        "step_s": float(timed["step_time"].mean()),
        "step_s_median": float(timed["step_time"].median()),
        "completion_tokens_per_step": float(tokens.mean()),
        "completion_tokens_per_s": float(tokens.sum() / timed["step_time"].sum()),
        "train_wall_s": wall,
        "rollouts": manifest["rollouts"],
        "judged": manifest["judge"],
        "reward_by_step": [round(float(r), 4) for r in rewards],
        "reward_first5": float(rewards[:5].mean()),
        "reward_last5": float(rewards[-5:].mean()),
        "reward_slope_per_step": float(slope),
        "reward_slope_stderr": float(slope_error),
        "validation_combined": {
            int(s): float(c)
            for s, c in zip(validation["step"], validation["combined"], strict=True)
        },
    }


def table(runs: dict) -> str:
    """Step time and throughput of every run against the one-GPU run at the recipe's batch."""
    base = runs.get("1xB")
    lines = [
        "| run | completions/step | step | completion tok/s | step vs 1xB | tok/s vs 1xB |"
        " reward first 5 -> last 5 | slope/step (se) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for name, r in runs.items():
        step = f"{r['step_s'] / base['step_s']:.2f}x" if base else "-"
        ratio = r["completion_tokens_per_s"] / base["completion_tokens_per_s"] if base else None
        speed = f"{ratio:.2f}x" if ratio else "-"
        lines.append(
            f"| {name} | {r['completions_per_step']} | {r['step_s']:.2f} s "
            f"| {r['completion_tokens_per_s']:,.0f} | {step} | {speed} "
            f"| {r['reward_first5']:.3f} -> {r['reward_last5']:.3f} "
            f"| {r['reward_slope_per_step']:+.4f} ({r['reward_slope_stderr']:.4f}) |"
        )
    return "\n".join(lines)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # NVLink multicast stays off
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", required=True, help="policy model directory")
    parser.add_argument("--recipe", default="gpu-qwen0.5b")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--runs", default="1xB,2xB,2x2B")
    parser.add_argument("--work", type=Path, default=Path("/tmp/grpo_scaling"))
    parser.add_argument("--json", type=Path, default=Path("grpo_scaling.json"))
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args()
    model_dir = resolve_model(args.model)
    base = load_config(args.recipe, args.overrides)
    curated = run_curate(load_config(args.recipe, [*args.overrides, f"storage.root={args.work}"]))
    runs = {}
    for name in args.runs.split(","):
        overrides = run_overrides(name, base.train.prompts_per_step, args.steps, args.work)
        config = load_config(args.recipe, [*args.overrides, *overrides])
        out = args.work / f"run-{name}-{int(time.time())}"
        start = time.perf_counter()
        train(config, model_dir, curated / "train.parquet", curated / "validation.parquet", out)
        completions = config.train.prompts_per_step * config.train.num_generations
        runs[name] = summarize(out, completions, time.perf_counter() - start)
        log.info("%s: %s", name, json.dumps(runs[name]))
    result = {
        "date": time.strftime("%Y-%m-%d"),
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else platform.processor(),
        "gpus_visible": torch.cuda.device_count(),
        "torch": torch.__version__,
        "recipe": args.recipe,
        "model": str(model_dir),
        "steps": args.steps,
        "overrides": args.overrides,
        "runs": runs,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(table(runs))
    print(f"figures in {args.json}")


if __name__ == "__main__":
    main()
