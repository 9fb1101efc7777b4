"""Agreement of the local judge with ArGen's LLM judges (Claude 3.5 Sonnet, Gemini 2.0 Flash),
measured out of fold.

    python -m benchmarks.judge_agreement [--reference PATH] [--limit N] [--folds 5]
                                         [--resamples 1000] [--tune NAMES] [--write]
    python -m benchmarks.judge_agreement --direct [--recipe openai-judge]

The default run is the honest protocol: every number and weight fitted to the reference set is
fitted by grouped k-fold cross-validation over prompts, and each response is scored by a judge
fitted without its prompt. It prints, per reference judge, the out-of-fold figures (violation
kappa, score Spearman, Spearman over the model variants' means) with 95% intervals from
resampling prompts, for: the rules with their shipped numbers (hand-set, not fitted), the rules
with numbers tuned in fold, the learned head (argen/judging/learned.py) fitted in fold, and the
floor of two naive judges; then agreement tables and the Dharma violation confusion of each.
`--write` refits on every row and saves what ships (learned_head.npz; with --tune, the numbers).
`--direct` scores the rows once with the recipe's configured judge (e.g. an LLM judge, which
fits nothing, so its figures need no folds). Embeddings are cached under
artifacts/judge_agreement/ between runs.
"""

import argparse
import json
import sys
import time
from pathlib import Path

import pandas as pd

from argen.config import load_config
from argen.errors import ArgenError
from argen.judging.agreement import (
    agreement_table,
    bootstrap_figures,
    confusion,
    load_reference,
    model_ranking,
    naive_judges,
    sample_across_prompts,
    score_reference,
)
from argen.judging.calibration import (
    CachedEncoder,
    fit_all,
    fit_head,
    learned_fitter,
    out_of_fold,
    reference_features,
    rubric_rows,
    rules_fitter,
    write_params,
)
from argen.judging.learned import HEAD_FILE, design_matrix, head_sha256
from argen.judging.local import LocalParams
from argen.judging.scoring import make_backend

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_REFERENCE = ROOT.parent / "shared/argen_judgments/calibration.jsonl"
EMBEDDING_CACHE = ROOT / "artifacts/judge_agreement/embeddings.npz"


def show(title: str, frame: pd.DataFrame) -> None:
    print(f"\n## {title}\n")
    print(frame.round(3).to_markdown(index=False))


def interval_table(figures: pd.DataFrame) -> pd.DataFrame:
    """One row per reference judge and figure, one column per judge of ours: "0.63 [0.50, 0.73]"."""
    cells = figures.assign(
        cell=[
            f"{v:.3f} [{lo:.2f}, {hi:.2f}]"
            for v, lo, hi in zip(figures["value"], figures["low"], figures["high"], strict=True)
        ]
    )
    table = cells.pivot_table(
        index=["reference", "metric", "dimension"], columns="judge", values="cell", aggfunc="first"
    )
    order = list(dict.fromkeys(figures["judge"]))
    return table[order].reset_index()


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reference", type=Path, default=DEFAULT_REFERENCE)
    parser.add_argument(
        "--limit", type=int, default=None, help="about N rows spread over every prompt and judge"
    )
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--resamples", type=int, default=1000, help="prompt bootstrap resamples")
    parser.add_argument(
        "--tune", help="comma-separated numbers the rules tune in fold (default: every GRID one)"
    )
    parser.add_argument(
        "--write",
        action="store_true",
        help="refit the learned head (and the --tune numbers) on every row and save them",
    )
    parser.add_argument("--direct", action="store_true", help="score once with --recipe's judge")
    parser.add_argument("--recipe", default="default")
    return parser.parse_args()


def direct(reference: pd.DataFrame, recipe: str) -> None:
    """Score the rows once with the recipe's judge (no fitting, so no folds)."""
    backend = make_backend(load_config(recipe).judge)
    start = time.perf_counter()
    ours = score_reference(backend, reference)
    print(
        f"judge {backend.name}: {len(reference)} responses in {time.perf_counter() - start:.1f} s"
    )
    report(reference, {backend.name: ours}, resamples=1000)


def report(reference: pd.DataFrame, judges: dict[str, pd.DataFrame], resamples: int) -> None:
    """Interval figures for every judge, then tables, rankings and confusions."""
    judges = {**judges, **naive_judges(reference)}
    figures = bootstrap_figures(reference, judges, resamples=resamples)
    show(
        f"Figures with 95% intervals over {resamples} prompt resamples (kappa: violation flag; "
        "spearman: score; ranking: Spearman over the model variants' mean scores)",
        interval_table(figures),
    )
    for name, ours in judges.items():
        show(f"{name}: agreement", agreement_table(reference, ours))
        show(f"{name}: model ranking", model_ranking(reference, ours))
        print(f"\n{name}: Dharma violation confusion (reference value -> our value -> count)\n")
        print(json.dumps(confusion(reference, ours, "dharma_violation")))


def main() -> None:
    args = parse_args()
    try:
        reference = load_reference(args.reference)
    except ArgenError as exc:
        sys.exit(f"error: {exc} (pass --reference PATH to ArGen's calibration.jsonl)")
    if args.limit:
        reference = sample_across_prompts(reference, args.limit)
    if args.direct:
        direct(reference, args.recipe)
        return
    names = args.tune.split(",") if args.tune else None
    start = time.perf_counter()
    features = reference_features(reference, CachedEncoder(EMBEDDING_CACHE))
    print(f"features of {len(reference)} responses in {time.perf_counter() - start:.1f} s")
    shipped = LocalParams.load()
    start = time.perf_counter()
    tuned = out_of_fold(reference, rules_fitter(reference, features, shipped, names), args.folds)
    print(f"rules tuned in {args.folds} grouped folds in {time.perf_counter() - start:.1f} s")
    start = time.perf_counter()
    learned = out_of_fold(reference, learned_fitter(reference, features, shipped), args.folds)
    print(
        f"learned head fitted in {args.folds} grouped folds in {time.perf_counter() - start:.1f} s"
    )
    judges = {
        "rules, shipped numbers": rubric_rows(features, reference, shipped),
        "rules, numbers tuned in fold": tuned,
        "learned head, fitted in fold": learned,
    }
    print(f"\nshipped head (local_params.yaml): {shipped.head}")
    report(reference, judges, args.resamples)
    if args.write:
        write(reference, features, shipped, names)


def write(reference: pd.DataFrame, features: list, shipped: LocalParams, names) -> None:
    """Refit on every row: the rules' tuned numbers (only with --tune) and the learned head."""
    if names:
        params = fit_all(reference, start=shipped, features=features, names=names)
        write_params(params)
        print(f"wrote the numbers tuned on all {len(reference)} rows: {params}")
    head = fit_head(design_matrix(features, shipped), reference)
    head.save(HEAD_FILE)
    print(f"wrote {HEAD_FILE.name} fitted on all {len(reference)} rows, sha256 {head_sha256()}")


if __name__ == "__main__":
    main()
