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
from argen.judging.reader import ReaderJudge, load_reader, predict
from argen.training.grader import figures_of, fit, fit_heads, held_out_split, save

log = logging.getLogger("grader_backbones")


def save_variant(model, backbone: str, tuned: bool, train, figures: dict, out: Path, epochs: int):
    """Save a grader trained here under `out` with its held-out figures; its folder."""
    name = f"reader-{backbone.split('/')[-1].lower()}{'-tuned' if tuned else ''}"
    settings = {"encoder": "tuned (LoRA)" if tuned else "as packaged", "seed": 0}
    return save(model, train, figures, out / name, settings | {"epochs": epochs}, backbone)


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
    tuned = mode == "finetune"
    if backbone == "trained":
        model, tokenizer, _ = load_reader(Path(mode))
    elif tuned:
        model, tokenizer = fit(train, backbone, epochs=epochs)
    else:
        model, tokenizer = fit_heads(train, backbone)
    if backbone != "trained":
        seconds = round(time.perf_counter() - started, 1)
    pairs = list(zip(held["prompt"], held["response"], strict=True))
    props, quality = predict(model, tokenizer, pairs)  # once: every subset is measured from it
    figures = figures_of(held, props, quality)
    own = {}
    if subset is not None:
        inside = held["item"].isin(subset["item"]).to_numpy()
        own = {"subset": summary(figures_of(subset, props[inside], quality[inside]))}
    folder = (
        Path(mode)
        if backbone == "trained"
        else save_variant(model, backbone, tuned, train, figures, out, epochs)
    )
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
