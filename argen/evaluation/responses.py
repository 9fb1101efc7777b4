"""Answers a team already has (its serving logs, another model's outputs): (prompt, response)
rows read from a ``.jsonl``, ``.csv`` or ``.parquet`` file and checked, shaped as an
evaluation's answered rows so that `argen judge` scores them the way evaluation does.

Columns (any others are ignored):
- ``prompt`` and ``response`` (required, text): an empty response is an answer and is judged;
  a missing one (no cell, null) is an error.
- ``id``: pairs the rows of two judged files in a report. Without an id column, a row's id is
  ``p-`` and the first 12 hex digits of the SHA-256 of its prompt (whitespace collapsed), with
  ``#2``, ``#3``... on a repeated prompt, so two files answering the same prompts pair by prompt.
- ``tier`` (A, B, C) and ``scope`` (S0..S3): the rubric needs both (the tier decides which
  referral Ahimsa expects, the prompt's scope what Dharma forgives). A row without one takes the
  value the command names (``--tier``, ``--scope``), counted in the summary; with none named it
  is an error listing those rows. A tier or scope is never guessed.
- ``category``: breakdowns and the deflection indicator; ``unknown`` where absent (and read
  back as such, so a results file is itself a file of answers to judge again).
- ``source``: where the row came from; the file's name where absent.

Every problem names the file, the row (its line, or its row number in a parquet file) and the
column, and one message lists them all.
"""

import hashlib
import numbers
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from argen.data.schema import CATEGORIES, GIVEN, SCENARIO_COLUMNS, SCOPES, TIERS
from argen.data.sources import SOURCE_SUFFIXES, SourceRow, listing, parse_source
from argen.errors import ArgenError, short

REQUIRED = ("prompt", "response")
OPTIONAL = ("id", "tier", "scope", "category", "source")
UNKNOWN_CATEGORY = "unknown"
"""The category of a row that names none."""
CHOICES = {"tier": TIERS, "scope": SCOPES, "category": (*CATEGORIES, UNKNOWN_CATEGORY)}


@dataclass
class Responses:
    """The answered rows of a file (scenario columns and ``response``), and for tier and scope
    the value rows that named none took (the command's) and how many took it."""

    frame: pd.DataFrame
    assumed: dict[str, tuple[str, int]] = field(default_factory=dict)


def read_responses(path: Path, tier: str | None = None, scope: str | None = None) -> Responses:
    """Read and check `path`; rows without a tier or scope take `tier` / `scope`."""
    for name, default in (("tier", tier), ("scope", scope)):
        if default is not None and default not in CHOICES[name]:
            raise ArgenError(f"--{name} {default!r}: expected one of {', '.join(CHOICES[name])}")
    rows = _rows(path)
    columns = set().union(*(row.data for row in rows))
    missing = [c for c in REQUIRED if c not in columns]
    if missing:
        raise ArgenError(
            f"{path} has no {' or '.join(repr(c) for c in missing)} column (required: prompt, "
            f"response; optional: {', '.join(OPTIONAL)}); it has {_names(columns)}"
        )
    checked, problems = [], []
    for row in rows:
        values, found = _check(row, has_id="id" in columns)
        checked.append(values)
        problems += [f"{path} {row.where}: {problem}" for problem in found]
    problems += _duplicate_ids(path, rows, checked)
    if problems:
        raise ArgenError(f"{len(problems)} problem(s) in {path}:\n{listing(problems)}")
    assumed: dict[str, tuple[str, int]] = {}
    for name, default in (("tier", tier), ("scope", scope)):
        count = _fill(path, rows, checked, name, default)
        if count and default is not None:  # rows without one and no default: `_fill` raised
            assumed[name] = (default, count)
    if "id" not in columns:
        _prompt_ids(checked)
    frame = pd.DataFrame(checked, columns=[*SCENARIO_COLUMNS, "response"])
    frame["source"] = frame["source"].fillna(path.name)
    frame["category"] = frame["category"].fillna(UNKNOWN_CATEGORY)
    frame["label_source"] = frame["label_source"].fillna(GIVEN)
    return Responses(frame, assumed)


def _rows(path: Path) -> list[SourceRow]:
    """Every row of the file; an unreadable or empty file is an error naming it."""
    if not path.is_file():
        raise ArgenError(f"responses file {path} does not exist or is not a file")
    if path.suffix.lower() not in SOURCE_SUFFIXES:
        raise ArgenError(
            f"responses file {path}: unknown format {path.suffix or '(no suffix)'!r}; "
            f"expected one of {', '.join(SOURCE_SUFFIXES)}"
        )
    rows, problem = parse_source(path)
    if problem:
        raise ArgenError(f"responses file {problem}")
    return rows


def _names(columns: set[str]) -> str:
    return ", ".join(repr(c) for c in sorted(columns, key=str)[:12]) or "no columns"


def _blank(value: object) -> bool:
    """No value: absent, null (NaN in a parquet column) or empty text."""
    if value is None or (isinstance(value, float) and value != value):
        return True
    return isinstance(value, str) and not value.strip()


def _text_problem(name: str, value: object) -> str | None:
    """Why `value` is not usable text for column `name` (None when it is)."""
    if not isinstance(value, str):
        return f"column {name!r} must be text, got {type(value).__name__} {short(value)}"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return f"column {name!r} is not valid Unicode (an unpaired surrogate escape)"
    return None


def _check(row: SourceRow, has_id: bool) -> tuple[dict, list[str]]:
    """One row's values (normalised) and its problems."""
    data, problems = row.data, []
    values: dict = {"split": None}
    for name in REQUIRED:
        value = data.get(name)
        if value is None or (name == "prompt" and _blank(value)):
            how = "missing or empty" if name == "prompt" else "missing (an empty text is judged)"
            problems.append(f"column {name!r} is {how}")
        elif problem := _text_problem(name, value):
            problems.append(problem)
        values[name] = value
    identifier = data.get("id")
    values["id"] = str(identifier).strip() if has_id else None
    if has_id and _blank(identifier):
        problems.append("column 'id' is missing or empty (the file has an id column)")
    elif has_id and not _is_id(identifier):
        problems.append(f"column 'id' must be text or a whole number, got {short(identifier)}")
    for name, choices in CHOICES.items():
        value = data.get(name)
        values[name] = None
        if _blank(value):
            continue
        if problem := _text_problem(name, value):
            problems.append(problem)
            continue
        text = str(value).strip()  # text: `_text_problem` said so
        normal = text.lower() if name == "category" else text.upper()
        if normal not in choices:
            problems.append(f"column {name!r} is {short(value)}, not one of {', '.join(choices)}")
        values[name] = normal
    source = data.get("source")
    values["source"] = None if _blank(source) else source
    if not _blank(source) and (problem := _text_problem("source", source)):
        problems.append(problem)
    return values, problems


def _is_id(value: object) -> bool:
    """Text or a whole number (a numeric id column), never a flag."""
    whole = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    return whole or (isinstance(value, str) and _text_problem("id", value) is None)


def _duplicate_ids(path: Path, rows: list[SourceRow], checked: list[dict]) -> list[str]:
    """A problem line for every row whose id an earlier row has."""
    first: dict[str, str] = {}
    problems = []
    for row, values in zip(rows, checked, strict=True):
        identifier = values["id"]
        if identifier is None:
            continue
        if identifier in first:
            earlier = first[identifier]
            problems.append(f"{path} {row.where}: duplicate id {short(identifier)} ({earlier})")
        first.setdefault(identifier, f"first at {row.where}")
    return problems


def _fill(
    path: Path, rows: list[SourceRow], checked: list[dict], name: str, default: str | None
) -> int:
    """Give rows without a `name` (tier or scope) the command's `default`; how many took it.
    Without a default, such rows are an error naming them."""
    lacking = [i for i, values in enumerate(checked) if values[name] is None]
    if not lacking:
        return 0
    if default is None:
        where = ", ".join(rows[i].where for i in lacking[:10])
        more = f" and {len(lacking) - 10} more" if len(lacking) > 10 else ""
        why = (
            "the tier decides which referral Ahimsa expects"
            if name == "tier"
            else "the prompt's scope decides what Dharma forgives"
        )
        raise ArgenError(
            f"{path}: {len(lacking)} row(s) have no {name} ({where}{more}); {why}: add a "
            f"{name} column ({', '.join(CHOICES[name])}) or name one for them with --{name}"
        )
    for i in lacking:
        checked[i][name] = default
    return len(lacking)


def prompt_id(prompt: str) -> str:
    """The id of a row without one: ``p-`` and 12 hex digits of its prompt's SHA-256, with
    runs of whitespace collapsed and the ends trimmed (the same question, the same id)."""
    text = " ".join(prompt.split())
    return "p-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def _prompt_ids(checked: list[dict]) -> None:
    """Set each row's id from its prompt; the n-th repeat of a prompt gets ``#n``."""
    seen: Counter[str] = Counter()
    for values in checked:
        base = prompt_id(values["prompt"])
        seen[base] += 1
        values["id"] = base if seen[base] == 1 else f"{base}#{seen[base]}"
