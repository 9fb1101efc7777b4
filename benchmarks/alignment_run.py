"""A whole alignment run without an orchestrator, plus the same two models on a held-out slice.

    python -m benchmarks.alignment_run --recipe gpu --name gpu-example [--set KEY=VALUE ...]
        [--bundle out.tgz]

Runs curate -> baseline evaluation -> GRPO -> merge -> aligned evaluation -> report (every
stage content-keyed, so a repeated or resumed run reuses finished stages and resumes training
from its last checkpoint), then evaluates the same baseline and aligned models on
`data/holdout` (prompts written apart from `data/scenarios`, never used for training or model
selection) and reports that comparison too. Prints the headline of both reports; `--bundle`
packs both report folders, the training and validation logs, the selected LoRA adapter and
both models' responses.
"""

import argparse
import json
import logging
import tarfile
from pathlib import Path

from argen.config import load_config
from argen.outputs import Adapter, CuratedSplits, Evaluation, Report
from argen.pipeline import run_curate, run_evaluate, run_pipeline, run_report

log = logging.getLogger("alignment_run")

HOLDOUT = Path("data/holdout")
PEFT_FILES = ("adapter_config.json", "adapter_model.safetensors")
"""The adapter's own files (peft's format), bundled beside its logs."""


def holdout_split(config) -> Path:
    """The held-out prompts curated on their own, all into one test split."""
    held = config.model_copy(deep=True)
    held.curate.sources = [HOLDOUT]
    held.curate.split = held.curate.split.model_copy(
        update={"train": 0.0, "validation": 0.0, "test": 1.0}
    )
    return CuratedSplits(run_curate(held)).test


def headline(summary: dict) -> dict:
    """A report summary's verdict and release gate."""
    return {k: summary[k] for k in ("verdict", "gate") if k in summary}


def report_headline(report: Path) -> dict:
    return headline(Report(report).record()) | {"report": str(report)}


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--recipe", default="gpu")
    parser.add_argument("--name", default="gpu-example")
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--bundle", type=Path)
    args = parser.parse_args()
    config = load_config(args.recipe, args.overrides)
    paths = run_pipeline(config, args.name)
    held = holdout_split(config)
    held_baseline = run_evaluate(config, config.model.base, held, "baseline")
    held_aligned = run_evaluate(config, str(paths["merge"]), held, "aligned")
    held_report = run_report(
        config,
        Evaluation(held_baseline).results,
        Evaluation(held_aligned).results,
        name=f"{args.name}-holdout",
    )
    print(
        json.dumps(
            {"test": report_headline(paths["report"]), "holdout": report_headline(held_report)}
        )
    )
    if args.bundle:
        with tarfile.open(args.bundle, "w:gz") as tar:
            tar.add(paths["report"], arcname="report")
            tar.add(held_report, arcname="report-holdout")
            adapter = Adapter(paths["train"])
            for path in (adapter.training_log, adapter.validation_log, adapter.sidecar):
                tar.add(path, arcname=f"train/{path.name}")
            for name in PEFT_FILES:
                tar.add(adapter.path / name, arcname=f"train/{name}")
            evaluations = {
                "baseline": paths["baseline"],
                "aligned": paths["aligned"],
                "holdout-baseline": held_baseline,
                "holdout-aligned": held_aligned,
            }
            for name, folder in evaluations.items():
                for path in (Evaluation(folder).results, Evaluation(folder).sidecar):
                    tar.add(path, arcname=f"{name}/{path.name}")


if __name__ == "__main__":
    main()
