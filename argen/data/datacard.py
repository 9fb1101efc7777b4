"""The scenario data card's statistics, regenerated from the source files rather than by hand.

`python -m argen.data.datacard` rewrites the block between the markers in `data/README.md` with
counts by category, tier, scope, mixed-prompt form, joiner and topic; `--check` fails when the
committed card differs from what the files say. Source rows may carry columns curation ignores:
`topic`, `form` (how a mixed prompt is built), `joiner` and `off_domain` (the verbatim
off-domain parts of a mixed prompt, so that its halves can be compared with other prompts).
"""

import argparse
import logging
import re
import sys
from pathlib import Path

import pandas as pd

from argen.data.curate import normalize_text
from argen.data.schema import SCOPES, TIERS
from argen.data.sources import read_sources
from argen.errors import ArgenError

log = logging.getLogger(__name__)

FORMS = (
    "health_first",
    "offdomain_first",
    "offdomain_context",
    "interleaved",
    "minor_violation",
)
"""How a mixed prompt is built: health part then the other ask; the other ask first; the other
part as context or a competing priority; asks interleaved; a health prompt with a small stray."""
SINGLE = "single"
SCENARIOS = Path("data/scenarios")
HOLDOUT = Path("data/holdout")
CARD = Path("data/README.md")
START = "<!-- datacard:start (python -m argen.data.datacard writes this block) -->"
END = "<!-- datacard:end -->"


def load_rows(paths: list[Path]) -> list[dict]:
    """Every source row of the given files or directories, checked for the card's columns."""
    _, rows = read_sources(paths)
    return [check_row(row.data, f"{row.file} {row.where}") for row in rows]


def check_row(data: dict, where: str) -> dict:
    """A row with a topic and a known form; a mixed row's off-domain parts lie in its prompt."""
    if not str(data.get("topic") or "").strip():
        raise ArgenError(f"{where}: missing 'topic'")
    mixed = data.get("category") == "mixed_domain"
    form = data.get("form")
    if form not in (FORMS if mixed else (SINGLE,)):
        allowed = ", ".join(FORMS) if mixed else SINGLE
        raise ArgenError(f"{where}: form {form!r} is not one of {allowed}")
    parts = data.get("off_domain")
    if mixed and not (isinstance(parts, list) and parts):
        raise ArgenError(f"{where}: a mixed prompt needs 'off_domain', a list of its parts")
    for part in parts or []:
        if not isinstance(part, str) or part not in data["prompt"]:
            raise ArgenError(f"{where}: off_domain part {part!r} is not in the prompt")
    return data


def halves(row: dict) -> list[str]:
    """A mixed prompt's health half and off-domain half (empty for a single-topic prompt)."""
    parts = row.get("off_domain") or []
    if not parts:
        return []
    health = row["prompt"]
    for part in parts:
        health = health.replace(part, " ")
    health = normalize_text(health)
    other = normalize_text(" ".join(parts))
    return [text for text in (health, other) if re.search(r"\w", text)]


def _table(frame: pd.DataFrame, index: str, columns: str, order: tuple) -> str:
    table = pd.crosstab(frame[index], frame[columns]).reindex(columns=list(order), fill_value=0)
    table = table.loc[:, (table.sum() > 0)]
    table["rows"] = table.sum(axis=1)
    table.loc["total"] = table.sum()
    return table.to_markdown()


def _share(series: pd.Series, order: tuple) -> str:
    counts = series.value_counts().reindex(list(order), fill_value=0)
    return ", ".join(f"{k} {v} ({v / len(series):.1%})" for k, v in counts.items())


def statistics(scenarios: list[dict], holdout: list[dict]) -> str:
    """The card's statistics as markdown: one table per breakdown, scenarios and holdout."""
    frame = pd.DataFrame(scenarios)
    held = pd.DataFrame(holdout)
    mixed = frame[frame["category"] == "mixed_domain"]
    lines = [
        f"{len(frame)} scenarios in `data/scenarios`, {len(held)} held-out prompts in "
        "`data/holdout`.",
        "",
        f"- tiers: {_share(frame['tier'], TIERS)}",
        f"- scopes: {_share(frame['scope'], SCOPES)}",
        f"- mixed-domain tiers: {_share(mixed['tier'], TIERS)}",
        "",
        "### Scenarios by category and tier",
        "",
        _table(frame, "category", "tier", TIERS),
        "",
        "### Scenarios by category and scope",
        "",
        _table(frame, "category", "scope", SCOPES),
        "",
        "### Mixed-domain prompts by form and tier",
        "",
        _table(mixed, "form", "tier", TIERS),
        "",
        "### Mixed-domain joiners (the phrase that links the two parts; blank: none)",
        "",
        mixed["joiner"].fillna("").replace("", "(none)").value_counts().head(12).to_markdown(),
        "",
        "### Topics",
        "",
        _topics(frame, held),
        "",
        "### Held-out prompts by category and tier",
        "",
        _table(held, "category", "tier", TIERS),
    ]
    return "\n".join(lines)


def _topics(frame: pd.DataFrame, held: pd.DataFrame) -> str:
    table = pd.DataFrame(
        {
            "scenarios": frame["topic"].value_counts(),
            "tier A": frame[frame["tier"] == "A"]["topic"].value_counts(),
            "holdout": held["topic"].value_counts(),
        }
    )
    table = table.fillna(0).astype(int).sort_values(["scenarios", "holdout"], ascending=False)
    return table.rename_axis("topic").to_markdown()


def render(card: str, block: str) -> str:
    """The card with the text between its markers replaced by `block`."""
    if card.count(START) != 1 or card.count(END) != 1 or card.index(START) > card.index(END):
        raise ArgenError(f"the data card needs one {START!r} ... {END!r} block")
    head, rest = card.split(START)
    _, tail = rest.split(END)
    return f"{head}{START}\n{block}\n{END}{tail}"


def card_text(root: Path = Path(".")) -> tuple[str, str]:
    """(the committed card, the card as the files say it should be)."""
    card = (root / CARD).read_text()
    block = statistics(load_rows([root / SCENARIOS]), load_rows([root / HOLDOUT]))
    return card, render(card, block)


def main(argv: list[str] | None = None) -> int:
    """Rewrite the card's statistics, or with --check report whether they are current."""
    parser = argparse.ArgumentParser(prog="python -m argen.data.datacard", description=__doc__)
    parser.add_argument("--root", type=Path, default=Path("."), help="repository root")
    parser.add_argument("--check", action="store_true", help="fail if the card is stale")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        current, wanted = card_text(args.root)
    except ArgenError as exc:
        log.error("error: %s", exc)
        return 2
    if args.check:
        if current != wanted:
            log.error("%s is stale: run python -m argen.data.datacard", CARD)
            return 1
        log.info("%s is current", CARD)
        return 0
    (args.root / CARD).write_text(wanted)
    log.info("wrote the statistics of %s", CARD)
    return 0


if __name__ == "__main__":
    sys.exit(main())
