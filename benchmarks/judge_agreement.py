"""Agreement of a judge backend with ArGen's LLM judges (Claude 3.5 Sonnet, Gemini 2.0 Flash).

    python -m benchmarks.judge_agreement [--reference ../shared/argen_judgments/calibration.jsonl]
                                         [--recipe default] [--limit N]

Scores every reference response with the recipe's judge and prints, per reference judge:
kappa on each violation flag and on Dharma's response scope, Spearman and MAE of each score,
the same for two naive judges, the Dharma violation confusion matrix, and how our judge ranks
the 16 model variants against the reference (Spearman over model means).
"""

import argparse
import dataclasses
import json
import time
from pathlib import Path

import pandas as pd

from argen.agreement import (
    agreement_table,
    confusion,
    load_reference,
    model_ranking,
    naive_judges,
    score_reference,
)
from argen.calibration import cross_validate, fit_all, reference_features, rubric_rows, write_params
from argen.config import load_config
from argen.judges.local import LocalParams
from argen.judging import make_backend

HEADER = """# The local judge's numbers (argen/judges/local.py, LocalParams), tuned against
# ArGen's LLM judges by `python -m benchmarks.judge_agreement --calibrate --write`
# (coordinate descent, argen/calibration.py). Changing any of them changes the local
# judge's name, the rubric version and every cache key that depends on them.
"""

DEFAULT_REFERENCE = Path(__file__).resolve().parents[2] / "shared/argen_judgments/calibration.jsonl"


def show(title: str, frame: pd.DataFrame) -> None:
    print(f"\n## {title}\n")
    print(frame.round(3).to_markdown(index=False))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reference", type=Path, default=DEFAULT_REFERENCE)
    parser.add_argument("--recipe", default="default")
    parser.add_argument("--limit", type=int, default=None, help="first N responses only")
    parser.add_argument(
        "--calibrate",
        action="store_true",
        help="grouped 5-fold cross-validated tuning of the local judge's numbers",
    )
    parser.add_argument(
        "--write",
        action="store_true",
        help="with --calibrate: save the numbers tuned on all responses",
    )
    parser.add_argument(
        "--tune",
        help="with --calibrate: comma-separated names of the only numbers to tune (default: all)",
    )
    args = parser.parse_args()
    reference = load_reference(args.reference)
    if args.limit:
        reference = reference.iloc[: args.limit]
    config = load_config(args.recipe)
    backend = make_backend(config.judge)
    start = time.perf_counter()
    features = None
    if args.calibrate:  # the local judge's features, extracted once for scoring and tuning
        features = reference_features(reference)
        ours = rubric_rows(features, reference, LocalParams.load())
    else:
        ours = score_reference(backend, reference)
    seconds = time.perf_counter() - start
    print(f"judge {backend.name}: {len(reference)} responses in {seconds:.1f} s")
    show("Our judge vs each reference judge", agreement_table(reference, ours))
    for name, naive in naive_judges(reference).items():
        show(f"Naive judge: {name}", agreement_table(reference, naive))
    show(
        "Model ranking (Spearman over the model variants' mean scores)",
        model_ranking(reference, ours),
    )
    print("\n## Dharma violation confusion (reference rows x ours columns)\n")
    print(json.dumps(confusion(reference, ours, "dharma_violation"), indent=1))
    if features is not None:
        calibrate(reference, features, args.write, args.tune.split(",") if args.tune else None)


def calibrate(
    reference: pd.DataFrame, features: list, write: bool, names: list[str] | None
) -> None:
    """Grouped cross-validated figures of the tuned local judge, then (optionally) ship it."""
    start = time.perf_counter()
    out_of_fold, chosen = cross_validate(reference, features=features, names=names)
    print(
        f"\n# Calibrated local judge, grouped 5-fold cross-validation by prompt "
        f"({time.perf_counter() - start:.0f} s)"
    )
    show(
        "Out-of-fold agreement (numbers tuned without the scored prompts)",
        agreement_table(reference, out_of_fold),
    )
    show("Out-of-fold model ranking", model_ranking(reference, out_of_fold))
    changed = {
        f.name
        for p in chosen
        for f in dataclasses.fields(p)
        if getattr(p, f.name) != getattr(LocalParams.load(), f.name)
    }
    print(f"\nnumbers the folds changed: {sorted(changed)}")
    if write:
        tuned = fit_all(reference, features=features, names=names)
        write_params(tuned, HEADER)
        print(f"wrote the numbers tuned on all {len(reference)} responses: {tuned}")


if __name__ == "__main__":
    main()
