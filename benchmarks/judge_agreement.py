"""Agreement of a judge backend with ArGen's LLM judges (Claude 3.5 Sonnet, Gemini 2.0 Flash).

    python -m benchmarks.judge_agreement [--reference ../shared/argen_judgments/calibration.jsonl]
                                         [--recipe default] [--limit N]

Scores every reference response with the recipe's judge and prints, per reference judge:
kappa on each violation flag and on Dharma's response scope, Spearman and MAE of each score,
the same for two naive judges, the Dharma violation confusion matrix, and how our judge ranks
the 16 model variants against the reference (Spearman over model means).
"""

import argparse
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
from argen.config import load_config
from argen.judging import make_backend

DEFAULT_REFERENCE = Path(__file__).resolve().parents[2] / "shared/argen_judgments/calibration.jsonl"


def show(title: str, frame: pd.DataFrame) -> None:
    print(f"\n## {title}\n")
    print(frame.round(3).to_markdown(index=False))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reference", type=Path, default=DEFAULT_REFERENCE)
    parser.add_argument("--recipe", default="default")
    parser.add_argument("--limit", type=int, default=None, help="first N responses only")
    args = parser.parse_args()
    reference = load_reference(args.reference)
    if args.limit:
        reference = reference.iloc[: args.limit]
    config = load_config(args.recipe)
    backend = make_backend(config.judge)
    start = time.perf_counter()
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


if __name__ == "__main__":
    main()
