"""Hand-written data files and their cards: the one way to read JSON Lines with each record's
place (file:line) for errors, and to rewrite a card's statistics block from the files (or, with
``--check``, fail when it no longer matches them)."""

import argparse
import json
import logging
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from argen.errors import ArgenError

log = logging.getLogger(__name__)


def json_lines(files: Iterable[Path]) -> Iterator[tuple[str, object]]:
    """Each non-blank line of each file, parsed, with its place ``file:line``; a line that is
    not JSON is an error naming it."""
    for path in files:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                yield where, json.loads(line)
            except json.JSONDecodeError as exc:
                raise ArgenError(f"{where}: not valid JSON ({exc.msg})") from None


def jsonl_files(source: Path, what: str) -> list[Path]:
    """The JSON Lines files of one source: a folder's, sorted, or the one file it names; a
    missing source or an empty folder is an error naming `what` it should hold."""
    source = Path(source)
    if source.is_file():
        return [source]
    if not source.is_dir():
        raise ArgenError(f"{what} {source} not found (a .jsonl file or a folder of them)")
    found = sorted(source.glob("*.jsonl"))
    if not found:
        raise ArgenError(f"{what} folder {source} holds no .jsonl file")
    return found


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
