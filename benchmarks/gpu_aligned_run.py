"""The aligned GPU run, end to end on one GPU machine: a sweep that the validation split decides,
then the chosen variant through Prefect once per training seed, each with its holdout report.

    python -m benchmarks.gpu_aligned_run SWEEP.yaml --out DIR [--seeds 1 2] [--set KEY=VALUE ...]
        [--variant NAME]     # the sweep's choice from an earlier run: skip step 1

1. `benchmarks.alignment_sweep` runs SWEEP.yaml's variants side by side (with the `--set`
   overrides common to every run) into DIR/sweep; its summary names the variant chosen by the
   validation split alone (`summary.json`, rule there).
2. For each seed, at the same time (a small policy leaves room on one card),
   `benchmarks.prefect_gpu` starts its own Prefect server and workers and presses Run on the
   pipeline deployment with the recipe, the chosen variant's overrides, the common ones and
   ``train.seed``: training, merge and both evaluations run on the `gpu` pool. Its evidence
   goes to DIR/seedS/prefect.
3. `benchmarks.alignment_run` with the same settings then finds every stage of that run
   complete (content-keyed, nothing is recomputed), evaluates the same two models on
   `data/holdout` and writes DIR/seedS/run.tgz (both reports, logs, adapter, responses).

DIR/chosen.json records the choice; DIR/seedS/done marks a finished seed, so a caller can wait
for each step in turn.
"""

import argparse
import json
import logging
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

log = logging.getLogger("gpu_aligned_run")


def step(module: str, *args: str) -> None:
    """Run one benchmark module to completion; a failure stops the whole run."""
    command = [sys.executable, "-m", module, *args]
    log.info("%s", " ".join(command))
    subprocess.run(command, check=True)


def in_parallel(jobs: list[tuple]) -> None:
    """Call each ``(function, *args)`` in its own thread; the first failure is raised."""
    with ThreadPoolExecutor(len(jobs)) as pool:
        for future in [pool.submit(*job) for job in jobs]:
            future.result()


def sets(overrides: list[str]) -> list[str]:
    return [arg for item in overrides for arg in ("--set", item)]


def choose(sweep: Path, out: Path, common: list[str], variant: str | None) -> tuple[str, list[str]]:
    """Run the sweep (unless `variant` names its earlier choice); the recipe and the overrides
    of the variant the validation split chose."""
    spec = yaml.safe_load(sweep.read_text())
    if variant is None:
        step("benchmarks.alignment_sweep", str(sweep), "--out", str(out / "sweep"), *sets(common))
        summary = json.loads((out / "sweep" / "summary.json").read_text())
        rule = summary["rule"]
        chosen = summary["chosen"]
        if chosen is None:
            raise SystemExit(f"no variant of {sweep} qualified: {rule}")
    elif variant not in spec["variants"]:
        raise SystemExit(f"{sweep} has no variant {variant!r}")
    else:
        chosen, rule = variant, "named with --variant (an earlier sweep's choice)"
    overrides = [*spec["variants"][chosen], *common]
    record = {"variant": chosen, "recipe": spec["recipe"], "overrides": overrides}
    (out / "chosen.json").write_text(json.dumps(record | {"rule": rule}, indent=1))
    log.info("validation chose %s: %s", chosen, overrides)
    return spec["recipe"], overrides


def seeded_run(recipe: str, overrides: list[str], seed: int, out: Path, timeout: int) -> None:
    """One training seed through Prefect, then its holdout report and bundle."""
    folder = out / f"seed{seed}"
    seeded = [*overrides, f"train.seed={seed}"]
    home = f"/tmp/argen-prefect-seed{seed}"
    step(
        "benchmarks.prefect_gpu",
        *("--recipe", recipe, "--out", str(folder / "prefect"), "--home", home),
        *("--port", str(4200 + seed)),
        *("--timeout", str(timeout)),
        *sets(seeded),
    )
    named = ("--recipe", recipe, "--name", f"gpu-example-seed{seed}")
    step("benchmarks.alignment_run", *named, "--bundle", str(folder / "run.tgz"), *sets(seeded))
    (folder / "done").touch()


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("sweep", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--timeout", type=int, default=3000, help="per pipeline run, seconds")
    parser.add_argument("--variant", help="skip the sweep: the variant an earlier one chose")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    recipe, overrides = choose(args.sweep, args.out, args.overrides, args.variant)
    in_parallel([(seeded_run, recipe, overrides, s, args.out, args.timeout) for s in args.seeds])


if __name__ == "__main__":
    main()
