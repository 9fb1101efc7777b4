"""One judge interface: score items into result rows, through the cache and the rubric.

A backend turns (prompt, response) pairs into the judge's raw fields, or a `JudgeFailure` per
pair. `score_items` adds the cache, the rubric maths and the bookkeeping every result carries
(`judge_ok`, `judge_error`, `judge`, `rubric_version`). A failed judgement has NaN scores,
never a default of zero.
"""

import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from argen.console import UI_ONLY
from argen.judging import rubric
from argen.judging.cache import JudgementCache, cache_key

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JudgeItem:
    """One response to judge, with the scenario facts the rubric needs."""

    id: str
    prompt: str
    response: str
    tier: str
    scope: str


class JudgeFailure(Exception):
    """A judgement that could not be obtained after every retry."""


class Backend(Protocol):
    """What a judge backend provides."""

    name: str
    """Shown in results as ``judge``, e.g. ``openai/gpt-4o-mini`` or ``local/minilm-rules-1``."""

    @property
    def identity(self) -> Mapping:
        """Everything that can change its judgements (model, URL, parameters), for cache keys."""
        ...

    async def judge_many(self, pairs: Sequence[tuple[str, str]]) -> list[Mapping | JudgeFailure]:
        """Raw fields (``rubric.RAW_FIELDS``) or a failure for each (prompt, response)."""
        ...


REDACTED = "[REDACTED]"
BEARER = re.compile(r"(?i)\b(bearer\s+)(?!\[REDACTED\])[^\s'\",;}\]]+")
"""A bearer token; one already redacted is left alone (redacting twice must change nothing,
not make ``[REDACTED]]]``)."""


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with every secret (an API key) and any bearer token replaced by ``[REDACTED]``:
    the one filter for error text a judge stores or logs (servers may quote the header)."""
    for secret in sorted(filter(None, secrets), key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return BEARER.sub(lambda m: m.group(1) + REDACTED, text)


def failed_row(error: str) -> dict:
    """The fields of a failed judgement: every raw field missing, NaN scores, the error (with
    any bearer token redacted)."""
    raw = {f: None for f in rubric.RAW_FIELDS}
    return {**raw, **rubric.missing_scores(), "judge_ok": False, "judge_error": redact(error)}


def scored_row(raw: Mapping, item: JudgeItem, weights: Mapping[str, float]) -> dict:
    """The fields of a successful judgement: raw fields plus the rubric's derived scores."""
    fields = {f: raw[f] for f in rubric.RAW_FIELDS}
    scores = rubric.score(fields, item.tier, item.scope, weights)
    return {**fields, **scores, "judge_ok": True, "judge_error": None}


async def score_items(
    backend: Backend,
    items: Sequence[JudgeItem],
    weights: Mapping[str, float] = rubric.DEFAULT_WEIGHTS,
    cache: JudgementCache | None = None,
) -> list[dict]:
    """Judge every item (cached ones without a request); one result row per item, in order.

    Every judgement is checked (`rubric.raw_problem`) before the maths: an invalid cached one
    (a damaged or edited row) is a cache miss and judged again; an invalid fresh one is a
    failure, never a score."""
    keys = item_keys(backend, items)
    cached = valid_cached(cache.get_many(keys)) if cache is not None else {}
    todo = {key: item for key, item in zip(keys, items, strict=True) if key not in cached}
    log.info(
        "judging %d items with %s (%d cached)",
        len(items),
        backend.name,
        len(items) - len(todo),
        extra=UI_ONLY,
    )
    fresh: dict[str, Mapping | JudgeFailure] = {}
    if todo:
        pairs = [(item.prompt, item.response) for item in todo.values()]
        answers = await backend.judge_many(pairs)
        fresh = {key: checked(raw) for key, raw in zip(todo, answers, strict=True)}
        if cache is not None:
            cache.put_many(
                backend.name, {k: v for k, v in fresh.items() if not isinstance(v, JudgeFailure)}
            )
    rows = []
    for key, item in zip(keys, items, strict=True):
        raw = cached[key] if key in cached else fresh[key]
        row = (
            failed_row(str(raw))
            if isinstance(raw, JudgeFailure)
            else scored_row(raw, item, weights)
        )
        rows.append(
            {"id": item.id, **row, "judge": backend.name, "rubric_version": rubric.RUBRIC_VERSION}
        )
    return rows


def item_keys(backend: Backend, items: Sequence[JudgeItem]) -> list[str]:
    """Each item's cache key: the backend's identity, the rubric version and the two texts."""
    identity = {**backend.identity, "rubric_version": rubric.RUBRIC_VERSION}
    return [cache_key(identity, item.prompt, item.response) for item in items]


def count_cached(backend: Backend, items: Sequence[JudgeItem], cache: JudgementCache | None) -> int:
    """How many of `items` the cache holds a valid judgement for (none without a cache)."""
    if cache is None:
        return 0
    keys = item_keys(backend, items)
    found = valid_cached(cache.get_many(keys))
    return sum(key in found for key in keys)


def checked(raw: Mapping | JudgeFailure) -> Mapping | JudgeFailure:
    """A backend's answer, or a failure when its fields are not a valid judgement."""
    if isinstance(raw, JudgeFailure):
        return raw
    problem = rubric.raw_problem(raw)
    return JudgeFailure(f"invalid judgement: {problem}") if problem else raw


def valid_cached(found: Mapping[str, object]) -> dict[str, Mapping]:
    """The cached judgements that are valid; the others are misses, judged again."""
    valid: dict[str, Mapping] = {}
    for key, raw in found.items():
        problem = rubric.raw_problem(raw)
        if problem or not isinstance(raw, Mapping):
            log.warning("ignoring an invalid cached judgement (%s); judging it again", problem)
        else:
            valid[key] = raw
    return valid
