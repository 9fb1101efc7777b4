"""Trained LoRA adapters against their base model on named splits, without training again: how a
published adapter is checked on another machine, and how runs are compared on validation.

    python -m benchmarks.adapter_eval [ADAPTER ...] --recipe gpu-qwen1.5b-reader
        [--splits validation test holdout] [--set KEY=VALUE ...] [--bundle out.tgz]

Curates with the recipe, evaluates the base model once per split, then merges each adapter into
the base (`argen merge`), evaluates it on every split and compares it with the base in a report
per split. Every stage is content-keyed, so a repeat reuses what is done. `holdout` is
`data/holdout` curated on its own (as `benchmarks.alignment_run` does); `validation` is the split
runs are chosen on. `--bundle` packs, per adapter folder NAME and split, the report and both
results files (every answer) as NAME/SPLIT/{report,baseline,aligned}. With no adapter only the
base model is evaluated, so that processes sharing the artifacts root can then run side by side.
"""

import argparse
import json
import logging
import tarfile
from pathlib import Path

from argen.config import load_config
from argen.outputs import CuratedSplits, Evaluation
from argen.pipeline import run_curate, run_evaluate, run_merge, run_report
from benchmarks.alignment_run import holdout_split, report_headline

log = logging.getLogger("adapter_eval")

SPLITS = ("validation", "test", "holdout")


def split_files(config, names: list[str]) -> dict[str, Path]:
    """The scenarios file of each named split."""
    curated = CuratedSplits(run_curate(config))
    files = {"validation": curated.validation, "test": curated.test}
    return {name: holdout_split(config) if name == "holdout" else files[name] for name in names}


def evaluate_adapter(config, adapter: Path, splits: dict[str, Path], baselines: dict) -> dict:
    """Merge `adapter`, evaluate it on each split and report it against the base: per split,
    the report, baseline and aligned folders."""
    merged = str(run_merge(config, config.model.base, adapter))
    out = {}
    for name, scenarios in splits.items():
        aligned = run_evaluate(config, merged, scenarios, "aligned")
        report = run_report(
            config,
            Evaluation(baselines[name]).results,
            Evaluation(aligned).results,
            name=f"{adapter.name}-{name}",
        )
        out[name] = {"report": report, "baseline": baselines[name], "aligned": aligned}
        log.info("%s on %s: %s", adapter.name, name, json.dumps(report_headline(report)))
    return out


def bundle(path: Path, folders: dict[str, dict[str, dict[str, Path]]]) -> None:
    """Pack each adapter's reports and results files as NAME/SPLIT/..."""
    with tarfile.open(path, "w:gz") as tar:
        for adapter, splits in folders.items():
            for split, parts in splits.items():
                tar.add(parts["report"], arcname=f"{adapter}/{split}/report")
                for part in ("baseline", "aligned"):
                    evaluation = Evaluation(parts[part])
                    for file in (evaluation.results, evaluation.sidecar):
                        tar.add(file, arcname=f"{adapter}/{split}/{part}/{file.name}")


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("adapters", type=Path, nargs="*", help="LoRA adapter folders (peft)")
    parser.add_argument("--recipe", default="gpu")
    parser.add_argument("--splits", nargs="+", choices=SPLITS, default=list(SPLITS))
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--bundle", type=Path)
    args = parser.parse_args()
    config = load_config(args.recipe, args.overrides)
    splits = split_files(config, args.splits)
    baselines = {
        name: run_evaluate(config, config.model.base, scenarios, "baseline")
        for name, scenarios in splits.items()
    }
    folders = {
        adapter.name: evaluate_adapter(config, adapter, splits, baselines)
        for adapter in args.adapters
    }
    if args.bundle:
        bundle(args.bundle, folders)


if __name__ == "__main__":
    main()
