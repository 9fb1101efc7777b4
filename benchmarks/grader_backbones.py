"""Train the reading grader on several backbones and compare them held out, on a GPU.

    python -m benchmarks.grader_backbones --out DIR VARIANT [VARIANT ...] [--held-out-origin PREFIX]

A variant is BACKBONE[:finetune], BACKBONE being `all-MiniLM-L6-v2` (the packaged encoder) or a
model spec (e.g. qwen2.5-coder-0.5b-instruct). Each is trained on the labelled items of
train-split prompts (`argen.training.grader`), measured on those of validation-split prompts
(held out by prompt) and on the probe suite v2, and saved as a grader folder under DIR, with
DIR/figures.json holding every variant's figures and timings. A variant `trained:FOLDER` is a
grader trained earlier: measured and probed the same way on today's labels, not trained (the
"before" of a round of new labels). With `--held-out-origin`, each variant is also measured on
the held-out items of those origins alone (e.g. one policy's answers, what a reward on its line
sees). Every choice is made on the validation split and the probes; the test split is not read.
"""

import argparse
import json
import logging
import time
from pathlib import Path

import pandas as pd
import torch

from argen.data.labels import LABELS, read_labels
from argen.judging.probes import read_pairs, score_pairs, win_rates
from argen.judging.reader import ReaderJudge, load_reader
from argen.training.grader import fit, fit_heads, held_out_split, measure, save

log = logging.getLogger("grader_backbones")


def train_variant(
    backbone: str, tuned: bool, train, held, out: Path, epochs: int
) -> tuple[Path, dict, object, object]:
    """A grader trained on `train` and saved under `out`; its folder, held-out figures, model
    and tokenizer."""
    if tuned:
        model, tokenizer = fit(train, backbone, epochs=epochs)
    else:
        model, tokenizer = fit_heads(train, backbone)
    figures = measure(model, tokenizer, held)
    name = f"reader-{backbone.split('/')[-1].lower()}{'-tuned' if tuned else ''}"
    settings = {"encoder": "tuned (LoRA)" if tuned else "as packaged", "seed": 0}
    folder = save(model, train, figures, out / name, settings | {"epochs": epochs}, backbone)
    return folder, figures, model, tokenizer


def from_origins(held: pd.DataFrame, prefixes: list[str]) -> pd.DataFrame:
    """The held-out items whose origin starts with one of `prefixes`."""
    chosen = held[held["origin"].str.startswith(tuple(prefixes))].reset_index(drop=True)
    if chosen.empty:
        raise SystemExit(f"no held-out item has an origin starting with {prefixes}")
    return chosen


def summary(figures: dict) -> dict:
    """F1 per proposition, quality accuracy and the pairwise ranking, rounded for the table."""
    return {
        "f1": {k: round(v["f1"], 3) for k, v in figures["propositions"].items()},
        "quality_accuracy": round(figures["quality_accuracy"], 3),
        "pairwise": round(figures["pairwise"]["better_scored_higher"], 3),
    }


def run_variant(variant: str, train, held, subset, out: Path, epochs: int) -> dict:
    """Train, measure (on all held-out items, and on `subset` when given), save and probe one
    variant; its figures."""
    backbone, _, mode = variant.partition(":")
    gpu = torch.cuda.is_available()
    if gpu:
        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    seconds = None  # a grader trained earlier is not trained here
    if backbone == "trained":
        folder = Path(mode)
        model, tokenizer, _ = load_reader(folder)
        figures = measure(model, tokenizer, held)
    else:
        tuned = mode == "finetune"
        folder, figures, model, tokenizer = train_variant(backbone, tuned, train, held, out, epochs)
        seconds = round(time.perf_counter() - started, 1)
    own = {"subset": summary(measure(model, tokenizer, subset))} if subset is not None else {}
    del model
    started = time.perf_counter()
    table = win_rates(score_pairs(ReaderJudge(folder), read_pairs()))
    return {
        "variant": variant,
        "folder": str(folder),
        "held_out_items": len(held),
        "train_seconds": seconds,
        "probe_seconds": round(time.perf_counter() - started, 1),
        "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 1) if gpu else None,
        **summary(figures),
        **own,
        "probes": {k: int(v) for k, v in table["good_wins"].items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--labels", type=Path, default=LABELS)
    parser.add_argument("--epochs", type=int, default=4, help="epochs of a tuned backbone")
    parser.add_argument(
        "--held-out-origin",
        action="append",
        default=[],
        help="also measure on the held-out items whose origin starts with this (repeatable): "
        "e.g. one policy's answers",
    )
    parser.add_argument("variants", nargs="+")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    train, held = held_out_split(read_labels(args.labels))
    subset = from_origins(held, args.held_out_origin) if args.held_out_origin else None
    args.out.mkdir(parents=True, exist_ok=True)
    results = []
    for variant in args.variants:
        results.append(run_variant(variant, train, held, subset, args.out, args.epochs))
        log.info("%s", json.dumps(results[-1]))
        (args.out / "figures.json").write_text(json.dumps(results, indent=2) + "\n")
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
