"""Several alignment runs side by side on one machine, and the numbers that choose between them.

    python -m benchmarks.alignment_sweep SWEEP.yaml --out DIR [--threads N] [--set KEY=VALUE ...]
    python -m benchmarks.alignment_sweep SWEEP.yaml --out DIR --summary-only

SWEEP.yaml names a recipe, its variants (name -> overrides) and optionally `seeds`, training
seeds to repeat every variant with (runs NAME-seedS): one run of a configuration predicts the
next poorly, so a choice between variants should rest on several. Each run is
`benchmarks.alignment_run` in its own process with its own storage root, so runs share nothing
but the GPU, and writes DIR/RUN.log and DIR/RUN.tgz. A small model leaves the GPU mostly idle
between kernels, so a few runs together take little longer than one. `DIR/summary.json` then
holds, per run, the validation history (combined recomputed under the default weights, so
variants with different reward weights compare, beside the reward-hacking rates) and the test
and holdout headlines; per variant, its runs' best validation scores and their mean; and the
variant the validation split chooses.
"""

import argparse
import io
import json
import math
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pandas as pd
import yaml

from argen.evaluation.indicators import INDICATORS
from argen.judging.rubric import combined
from argen.outputs import Adapter, Report
from benchmarks.alignment_run import headline

VALIDATION_LOG = f"train/{Adapter.VALIDATION_LOG}"
MAX_RISE = 0.05
"""A variant whose kept checkpoint raises a gaming indicator by more than this is not chosen."""


def launch(recipe: str, name: str, overrides: list[str], out: Path, threads: int):
    """Start one alignment run; its output goes to out/NAME.log, its bundle to out/NAME.tgz."""
    sets = [f"storage.root=artifacts/sweep/{name}", *overrides]
    command = [sys.executable, "-m", "benchmarks.alignment_run", "--recipe", recipe]
    command += ["--name", name, "--bundle", str(out / f"{name}.tgz")]
    command += [arg for item in sets for arg in ("--set", item)]
    env = os.environ | {"OMP_NUM_THREADS": str(threads), "PYTHONUNBUFFERED": "1"}
    log = (out / f"{name}.log").open("w")
    return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)


def read_bundle(bundle: Path) -> tuple[list[dict], dict]:
    """The variant's validation history (combined recomputed under the default weights) and
    the headlines of its test and holdout reports."""
    with tarfile.open(bundle) as tar:
        history = pd.read_parquet(io.BytesIO(tar.extractfile(VALIDATION_LOG).read()))
        headlines = {
            split: headline(json.load(tar.extractfile(f"{folder}/{Report.SIDECAR}")))
            for split, folder in (("test", "report"), ("holdout", "report-holdout"))
        }
    history["combined_default"] = combined(history)
    return history.round(4).to_dict("records"), headlines


def best_trained(validation: list[dict]) -> dict | None:
    """The trained record (step > 0) the run kept: the highest validation ``objective`` (combined
    less the run's gaming penalties), else combined under the default weights. Each gaming
    indicator's rise over the untrained policy (step 0) is added as ``rise_<indicator>``."""
    trained = [r for r in validation if r["step"] > 0]
    if not trained:
        return None
    key = "objective" if all("objective" in r for r in trained) else "combined_default"
    best = dict(max(trained, key=lambda r: r[key]))
    start = next((r for r in validation if r["step"] == 0), {})
    for name in INDICATORS:
        before, after = start.get(name), best.get(name)
        known = all(isinstance(x, float) and not math.isnan(x) for x in (before, after))
        best[f"rise_{name}"] = round(after - before, 4) if known else None
    return best


def raises_gaming(record: dict) -> bool:
    """Whether a kept checkpoint raised a gaming indicator by more than `MAX_RISE` on validation."""
    return any((record.get(f"rise_{n}") or 0) > MAX_RISE for n in INDICATORS)


def scored_run(bundle: Path) -> dict:
    """A run's headlines, validation history and best trained record (empty for no bundle)."""
    validation, headlines = read_bundle(bundle) if bundle.is_file() else ([], None)
    return {
        "headline": headlines,
        "validation": validation,
        "best_validation": best_trained(validation),
    }


def expand(variants: dict[str, list[str]], seeds: list[int] | None) -> dict[str, dict]:
    """The runs of a sweep: each variant once, or once per training seed (NAME-seedS)."""
    if not seeds:
        return {name: {"variant": name, "overrides": sets} for name, sets in variants.items()}
    return {
        f"{name}-seed{seed}": {"variant": name, "overrides": [*sets, f"train.seed={seed}"]}
        for name, sets in variants.items()
        for seed in seeds
    }


def summarise(runs: dict[str, dict], out: Path) -> dict:
    """Each run's overrides, headlines and validation history; each variant's best validation
    scores over its runs and their mean; and the variant with the highest mean."""
    runs = {name: run | scored_run(out / f"{name}.tgz") for name, run in runs.items()}
    variants = {}
    for name, run in runs.items():
        if run["best_validation"]:
            variant = variants.setdefault(run["variant"], {"runs": {}, "raises_gaming": False})
            variant["runs"][name] = run["best_validation"]["combined_default"]
            variant["raises_gaming"] |= raises_gaming(run["best_validation"])
    for variant in variants.values():
        variant["mean_best"] = round(sum(variant["runs"].values()) / len(variant["runs"]), 4)
    eligible = [v for v in variants if not variants[v]["raises_gaming"]]
    summary = {
        "chosen": max(eligible, key=lambda v: variants[v]["mean_best"]) if eligible else None,
        "rule": "highest mean over a variant's runs of the kept checkpoint's validation combined "
        "under the default weights, among variants none of whose kept checkpoints raised a "
        f"gaming indicator by more than {MAX_RISE} over the untrained policy",
        "variants": variants,
        "runs": runs,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("sweep", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--threads", type=int, default=4, help="CPU threads per run")
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--summary-only", action="store_true")
    args = parser.parse_args()
    sweep = yaml.safe_load(args.sweep.read_text())
    if not isinstance(sweep, dict) or not {"recipe", "variants"} <= sweep.keys():
        parser.error(f"{args.sweep} must map 'recipe' to a recipe and 'variants' to overrides")
    seeds = sweep.get("seeds")
    if seeds is not None and not (
        isinstance(seeds, list) and seeds and all(isinstance(s, int) for s in seeds)
    ):
        parser.error(f"{args.sweep}: 'seeds' must be a non-empty list of integers")
    variants = {name: [*sets, *args.overrides] for name, sets in sweep["variants"].items()}
    runs = expand(variants, seeds)
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.summary_only:
        processes = {
            name: launch(sweep["recipe"], name, run["overrides"], args.out, args.threads)
            for name, run in runs.items()
        }
        codes = {name: process.wait() for name, process in processes.items()}
        (args.out / "exit_codes.json").write_text(json.dumps(codes))
    summarise(runs, args.out)


if __name__ == "__main__":
    main()
