"""Written twins scored as probe pairs: does a judge score each good answer above its twin?

    python -m benchmarks.twin_pairs JUDGE [JUDGE ...] [--labels FILE] [--good O] [--twin O]

A labels file of written pairs (`data/labels/written-redflags-train.jsonl`: for each prompt a
good answer and a twin with one fault, sharing the `scenario` id) read as the probe suite reads
its pairs (`argen.judging.probes.score_pairs`), one row per JUDGE: `local`, `reader` (the
packaged reading grader) or `reader:FOLDER` (a trained one). Pairs are grouped by the twin's
fault as its labels say (harmful, by the prompt's tier, or a needless escalation). A judge that
learned from the file is not measured fairly by it; the packaged graders never did.
"""

import argparse
import logging
from pathlib import Path

import pandas as pd

from argen.config import load_config
from argen.data.labels import read_labels
from argen.judging.probes import score_pairs, win_rates
from argen.judging.scoring import make_backend

log = logging.getLogger("twin_pairs")

LABELS = Path("data/labels/written-redflags-train.jsonl")


def twin_pairs(labels: pd.DataFrame, good: str, twin: str) -> pd.DataFrame:
    """One probe pair per scenario with a `good` and a `twin` answer, the twin as the hack; the
    category names the twin's fault."""
    goods = labels[labels["origin"] == good].set_index("scenario")
    twins = labels[labels["origin"] == twin].set_index("scenario")
    both = goods.index.intersection(twins.index)
    if both.empty:
        raise SystemExit(f"no scenario has both a {good!r} and a {twin!r} answer")
    goods, twins = goods.loc[both], twins.loc[both]
    harmful = twins["dangerous_instruction"].eq(True) | twins["medical_falsehood"].eq(True)
    fault = ("harmful, tier " + goods["tier"].astype(str)).where(harmful, "other")
    fault = fault.mask(~harmful & twins["needless_escalation"].eq(True), "needless escalation")
    return pd.DataFrame(
        {
            "pair": both,
            "category": fault.to_numpy(),
            "prompt": goods["prompt"].to_numpy(),
            "tier": goods["tier"].to_numpy(),
            "scope": goods["scope"].to_numpy(),
            "good": goods["response"].to_numpy(),
            "hack": twins["response"].to_numpy(),
            "from_policy": False,  # written, as the probe suite's tables count them
        }
    )


def judge_overrides(spec: str) -> list[str]:
    """`local`, `reader` or `reader:FOLDER` as config overrides."""
    backend, _, grader = spec.partition(":")
    if backend not in ("local", "reader") or (grader and backend != "reader"):
        raise SystemExit(f"judge {spec!r}: local, reader or reader:FOLDER")
    return [f"judge.backend={backend}", *([f"judge.grader={grader}"] if grader else [])]


def wins_table(scored: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Pairs per fault and how many each judge won, with an `all` row (the probe suite's
    `win_rates`, one column per judge)."""
    rates = {name: win_rates(frame) for name, frame in scored.items()}
    pairs = next(iter(rates.values()))["pairs"]
    wins = {name: rate["good_wins"] for name, rate in rates.items()}
    return pd.DataFrame({"pairs": pairs} | wins).astype(int)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("judges", nargs="+", help="local, reader or reader:FOLDER")
    parser.add_argument("--labels", type=Path, default=LABELS)
    parser.add_argument("--good", default="written:redflag-good")
    parser.add_argument("--twin", default="written:redflag-harm")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    pairs = twin_pairs(read_labels(args.labels), args.good, args.twin)
    scored = {
        spec: score_pairs(make_backend(load_config("default", judge_overrides(spec)).judge), pairs)
        for spec in args.judges
    }
    log.info(
        "good answer above its twin, by the twin's fault:\n%s", wins_table(scored).to_markdown()
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
