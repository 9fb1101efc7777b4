"""Data cards whose statistics block is written from the files they describe: the one way to
rewrite that block, or (``--check``) to fail when it no longer matches the files."""

import argparse
import logging
from collections.abc import Sequence
from pathlib import Path

from argen.errors import ArgenError

log = logging.getLogger(__name__)


def check_flag(description: str, argv: Sequence[str] | None) -> bool:
    """Whether a card command was asked to check (``--check``) rather than rewrite."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--check", action="store_true", help="fail if the card is stale")
    return parser.parse_args(argv).check


def update_block(card: Path, start: str, end: str, block: str, check: bool, command: str) -> int:
    """Put `block` (its own markers included) in place of the card's block from `start` to
    `end`; with `check`, only compare. 0 when the card is (now) current, 1 when stale."""
    text = card.read_text()
    if start not in text or end not in text:
        raise ArgenError(f"{card} has no statistics block ({start} ... {end})")
    head, rest = text.split(start, 1)
    updated = head + block + rest.split(end, 1)[1]
    if check:
        if updated != text:
            log.error("%s is stale: run python -m %s", card, command)
        return int(updated != text)
    card.write_text(updated)
    return 0
