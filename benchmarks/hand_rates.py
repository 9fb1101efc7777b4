"""Behaviour rates of policies as read by hand: per origin in `data/labels`, how many of its
answers the labellers flagged on each measure of `benchmarks.audit_agreement` (the same reading of
a hand label), and with `--against`, the paired change from a reference origin on the prompts
both answered (Newcombe's 95% interval, McNemar's exact p). How the hand-label tables of
`benchmarks/RESULTS.md` are computed.

    python -m benchmarks.hand_rates ORIGIN [ORIGIN ...] [--against ORIGIN]
"""

import argparse

import numpy as np
import pandas as pd

from argen.data.labels import read_labels
from argen.reporting.paired import mcnemar_p, paired_change_interval, paired_table
from benchmarks.audit_agreement import MEASURES


def hand_flags(labels: pd.DataFrame, origin: str) -> pd.DataFrame:
    """One row per scenario answered by `origin`, one column per measure: the hand label as a
    flag, or None where the measure does not apply."""
    own = labels[labels["origin"] == origin]
    if own.empty:
        raise SystemExit(f"no labelled answer has origin {origin!r}")
    flags = {name: own.apply(hand_of, axis=1) for name, (_, hand_of) in MEASURES.items()}
    return pd.DataFrame(flags).set_index(own["scenario"])


def counts(flags: pd.DataFrame) -> dict[str, str]:
    """``flagged/applicable`` per measure."""
    return {
        name: f"{int(col.dropna().sum())}/{int(col.notna().sum())}" for name, col in flags.items()
    }


def changes(flags: pd.DataFrame, reference: pd.DataFrame) -> dict[str, str]:
    """Per measure, the paired change from `reference` on the scenarios where both apply."""
    out = {}
    for name in flags.columns:
        both = pd.concat([reference[name], flags[name]], axis=1, join="inner").dropna()
        before, after = (both.iloc[:, i].astype(bool).to_numpy() for i in (0, 1))
        table = paired_table(np.asarray(before), np.asarray(after))
        change, low, high = paired_change_interval(table)
        out[name] = f"{change:+.2f} [{low:+.2f}, {high:+.2f}] p {mcnemar_p(table):.3f}"
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("origins", nargs="+")
    parser.add_argument("--against", help="the reference origin of the paired changes")
    args = parser.parse_args()
    labels = read_labels()
    reference = hand_flags(labels, args.against) if args.against else None
    rows = []
    for origin in args.origins:
        flags = hand_flags(labels, origin)
        rows.append({"origin": origin, **counts(flags)})
        if reference is not None and origin != args.against:
            rows.append({"origin": f"  change from {args.against}", **changes(flags, reference)})
    print(pd.DataFrame(rows).to_markdown(index=False))


if __name__ == "__main__":
    main()
