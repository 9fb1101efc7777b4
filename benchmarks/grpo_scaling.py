"""GRPO on one and on two GPUs of one host: step time, completion tokens/s, reward trend.

    PYTHONPATH=. python3 -m benchmarks.grpo_scaling --model NAME_OR_DIR [--recipe gpu-qwen0.5b]
        [--steps 10] [--runs 1xB,2xB,2x2B,1xB/2] [--json out.json] [--set KEY=VALUE ...]

Every run is the real training stage (`argen.training.train.train`; with ``train.num_processes`` 2
it starts two ranks with accelerate) on the recipe's curated train split, rewarded by the recipe's
judge (the local judge), from the same seed. A run ``NxB`` trains on N GPUs with the recipe's global
batch (``train.prompts_per_step`` x ``train.num_generations`` completions a step), ``Nx2B`` with
twice as many prompts a step, ``1xB/2`` with half as many: the sampler's order of prompts depends
only on the seed, so ``1xB/2`` trains at its steps 2k+1 and 2k+2 on exactly the prompts rank 0 and
rank 1 of ``2xB`` get at step k+1, on one GPU and without any exchange between ranks (a control for
a failure of ``2xB``: the batch, or the two processes). Validation and checkpoints are kept out of
the way (one small validation pass before and after, one checkpoint at the end).

Each run has a fresh Python process of its own: a one-process run sees only the first GPU
(``CUDA_VISIBLE_DEVICES``), a run of N processes sees all of them, and no run inherits another's
CUDA memory, engines or compiled kernels. A run that fails (a diverged step, a rank's error,
more than ``--run-timeout`` seconds) is recorded with its error and the ranks' gradient reports
(`argen.training.divergence.NonFiniteGuard` with ``per_rank``: which rank's own gradients turned
non-finite, in which parameters), and the next run goes on; the JSON is rewritten after every
run, so a call cut short keeps the runs that finished.

From each run's training log: TRL's ``step_time`` (rank 0: rollouts, judging, forward and
backward) and the completions' mean length (over all ranks), hence completion tokens per step
and per second; steps 1 and 2 (CUDA graph capture, allocator warm-up) are left out of the means.
The reward, loss and gradient norm per step (with a straight line fitted to the reward) let the
runs' learning be compared. Prints a table against ``1xB`` and writes every figure to ``--json``.
"""

import argparse
import collections
import json
import logging
import os
import platform
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from argen.config import load_config
from argen.models import resolve_model
from argen.outputs import Adapter, CuratedSplits
from argen.pipeline import run_curate
from argen.training.train import train

log = logging.getLogger("grpo_scaling")
WARM_UP_STEPS = 2
RANK_REPORT = re.compile(r"rank \d+ ERROR argen\.distributed: .*")


def run_shape(name: str) -> tuple[int, float]:
    """``<processes>x<batch>`` (batch ``B``, ``2B`` or ``B/2``) as (processes, batch multiple)."""
    match = re.fullmatch(r"(\d+)x(\d*)B(?:/(\d+))?", name)
    if not match:
        raise SystemExit(f"run {name!r} is not like 2xB, 2x2B or 1xB/2")
    return int(match.group(1)), int(match.group(2) or 1) / int(match.group(3) or 1)


def run_overrides(name: str, base_prompts: int, steps: int, root: Path) -> list[str]:
    """The overrides of one run."""
    processes, times = run_shape(name)
    return [
        f"storage.root={root}",
        f"train.num_processes={processes}",
        f"train.prompts_per_step={round(base_prompts * times)}",
        f"train.max_steps={steps}",
        f"train.save_steps={steps}",
        f"train.validation_steps={10 * steps}",
        "train.validation_prompts=8",
        "train.wandb_mode=disabled",
        "judge.cache=false",  # every run judges its own completions
    ]


def _per_step(steps: pd.DataFrame, column: str) -> list[float | None]:
    """One value a step (None where the step logged none)."""
    if column not in steps:
        return [None] * len(steps)
    return [None if pd.isna(v) else float(f"{v:.6g}") for v in steps[column]]


def summarize(out: Path, completions: int, wall: float) -> dict:
    """One run's figures from its training log and manifest."""
    adapter = Adapter(out)
    frame = pd.read_parquet(adapter.training_log)
    steps = frame.dropna(subset=["step_time"]).drop_duplicates("step", keep="last")
    timed = steps[steps["step"] > WARM_UP_STEPS]
    tokens = timed["completions/mean_length"] * completions
    rewards = steps["reward"].to_numpy(dtype=float)
    at = steps["step"].to_numpy(dtype=float)
    slope, intercept = np.polyfit(at, rewards, 1)
    spread = np.sqrt(((rewards - slope * at - intercept) ** 2).sum() / max(len(at) - 2, 1))
    slope_error = spread / np.sqrt(((at - at.mean()) ** 2).sum())
    norms = [v for v in _per_step(steps, "grad_norm") if v is not None]
    validation = pd.read_parquet(adapter.validation_log)
    manifest = adapter.record()
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
        "loss_by_step": _per_step(steps, "loss"),
        "grad_norm_by_step": _per_step(steps, "grad_norm"),
        "grad_norms_finite": bool(norms) and all(np.isfinite(norms)),
        "skipped_steps": int(frame.get("skipped_steps", pd.Series([0])).fillna(0).max()),
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
    base = runs.get("1xB") if "error" not in runs.get("1xB", {"error": 1}) else None
    lines = [
        "| run | completions/step | step | completion tok/s | step vs 1xB | tok/s vs 1xB |"
        " reward first 5 -> last 5 | slope/step (se) | grad norms finite |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |",
    ]
    for name, r in runs.items():
        if "error" in r:
            lines.append(f"| {name} | failed: {r['error'][:120]} |")
            continue
        step = f"{r['step_s'] / base['step_s']:.2f}x" if base else "-"
        ratio = r["completion_tokens_per_s"] / base["completion_tokens_per_s"] if base else None
        speed = f"{ratio:.2f}x" if ratio else "-"
        lines.append(
            f"| {name} | {r['completions_per_step']} | {r['step_s']:.2f} s "
            f"| {r['completion_tokens_per_s']:,.0f} | {step} | {speed} "
            f"| {r['reward_first5']:.3f} -> {r['reward_last5']:.3f} "
            f"| {r['reward_slope_per_step']:+.4f} ({r['reward_slope_stderr']:.4f}) "
            f"| {'yes' if r['grad_norms_finite'] else 'NO'} |"
        )
    return "\n".join(lines)


def run_one(args) -> None:
    """In a run's own process: train, then write its figures (or its error) to ``--result``."""
    logging.getLogger("argen.training.launch").setLevel(logging.DEBUG)  # the ranks' warnings too
    base = load_config(args.recipe, args.overrides)
    overrides = run_overrides(args.one, base.train.prompts_per_step, args.steps, args.work)
    config = load_config(args.recipe, [*args.overrides, *overrides])
    out = args.work / f"run-{args.one.replace('/', '_')}-{int(time.time())}"
    start = time.perf_counter()
    try:
        train(
            config,
            Path(args.model),
            CuratedSplits(args.curated).train,
            CuratedSplits(args.curated).validation,
            out,
        )
        completions = config.train.prompts_per_step * config.train.num_generations
        result = summarize(out, completions, time.perf_counter() - start)
    except Exception as exc:  # recorded; the next run still goes on
        log.exception("%s failed", args.one)
        result = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0]}"}
    args.result.write_text(json.dumps(result, indent=2, default=str))


def child_env(processes: int) -> dict[str, str]:
    """The run's environment: one GPU for a one-process run (the first visible), all for more."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.setdefault("NCCL_NVLS_ENABLE", "0")  # NVLink multicast stays off
    if processes == 1 and torch.cuda.is_available():
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        env["CUDA_VISIBLE_DEVICES"] = visible.split(",")[0] if visible else "0"
    return env


def spawn(name: str, args, model_dir: Path, curated: Path) -> dict:
    """Run `name` in a process of its own, echoing its output; its figures, or its error with
    the ranks' gradient reports and its last output lines."""
    result = args.work / f"result-{name.replace('/', '_')}.json"
    result.unlink(missing_ok=True)
    command = [sys.executable, "-m", "benchmarks.grpo_scaling", "--one", name]
    command += ["--model", str(model_dir), "--recipe", args.recipe, "--steps", str(args.steps)]
    command += ["--work", str(args.work), "--curated", str(curated), "--result", str(result)]
    command += [arg for item in args.overrides for arg in ("--set", item)]
    tail, reports = collections.deque(maxlen=30), []
    process = subprocess.Popen(
        command,
        env=child_env(run_shape(name)[0]),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
    )
    timer = threading.Timer(
        args.run_timeout, process.kill
    )  # its ranks follow it (argen.training.launch)
    timer.start()
    for line in process.stdout:
        sys.stdout.write(line)
        tail.append(line.rstrip())
        reports += RANK_REPORT.findall(line)
    code = process.wait()
    timer.cancel()
    figures = json.loads(result.read_text()) if result.is_file() else {}
    if "error" in figures or not figures:
        ended = f"killed after {args.run_timeout} s" if code == -9 else f"exit status {code}"
        figures = {"error": figures.get("error", ended)}
        figures.update(rank_reports=reports, last_output=list(tail))
    return figures


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", required=True, help="packaged model name or model directory")
    parser.add_argument("--recipe", default="gpu-qwen0.5b")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--runs", default="1xB,2xB,2x2B")
    parser.add_argument("--work", type=Path, default=Path("/tmp/grpo_scaling"))
    parser.add_argument("--json", type=Path, default=Path("grpo_scaling.json"))
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--run-timeout", type=int, default=300, help="seconds a run may take")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a run's own process
    parser.add_argument("--curated", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        return run_one(args)
    names = args.runs.split(",")
    for name in names:
        run_shape(name)
    model_dir = resolve_model(args.model)
    args.work.mkdir(parents=True, exist_ok=True)
    config = load_config(args.recipe, [*args.overrides, f"storage.root={args.work}"])
    curated = run_curate(config)
    result = {
        "date": time.strftime("%Y-%m-%d"),
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else platform.processor(),
        "gpus_visible": torch.cuda.device_count(),
        "torch": torch.__version__,
        "recipe": args.recipe,
        "model": str(model_dir),
        "steps": args.steps,
        "overrides": args.overrides,
        "runs": {},
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    for name in names:
        result["runs"][name] = spawn(name, args, model_dir, curated)
        log.info("%s: %s", name, json.dumps(result["runs"][name]))
        args.json.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(table(result["runs"]))
    print(f"figures in {args.json}")


if __name__ == "__main__":
    main()
