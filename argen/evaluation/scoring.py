"""Judging answered rows and summarising their scores: one way for evaluation, validation and
`argen judge` alike. Light on imports (no torch), so a command that only judges fails on bad
input before a model library loads."""

import asyncio
import logging
from contextlib import nullcontext

import pandas as pd
from tqdm.auto import tqdm

from argen.config import Config
from argen.console import UI_ONLY
from argen.evaluation.indicators import indicator_rates
from argen.hashing import json_sha256
from argen.judging import rubric
from argen.judging.base import Backend, JudgeItem, score_items
from argen.judging.scoring import check_so_far, open_cache

log = logging.getLogger(__name__)

JUDGE_CHUNK = 64
"""Items per judging call: the unit of progress reporting."""
FIRST_CHUNK = 16
"""The first call is smaller: a dead judge is noticed after one round of requests."""


def judge_items(frame: pd.DataFrame) -> list[JudgeItem]:
    """One item per answered row (``id``, ``prompt``, ``response``, ``tier``, ``scope``)."""
    return [JudgeItem(r.id, r.prompt, r.response, r.tier, r.scope) for r in frame.itertuples()]


def judge_frame(config: Config, backend: Backend, frame: pd.DataFrame, label: str) -> list[dict]:
    """Judge every row of an answered frame, in chunks so progress shows."""
    items = judge_items(frame)
    cache = open_cache(config)
    weights = config.judge.weights.model_dump()
    rows: list[dict] = []
    limit = config.judge.max_failure_rate
    starts = [0, *range(FIRST_CHUNK, len(items), JUDGE_CHUNK)]
    with tqdm(total=len(items), desc=f"judge ({label})", unit="item") as bar:
        for start, end in zip(starts, [*starts[1:], len(items)], strict=True):
            chunk = items[start:end]
            batch = json_sha256([backend.identity, [(i.prompt, i.response) for i in chunk]])
            with cache.claim(batch) if cache is not None else nullcontext():  # one asks, not two
                rows.extend(asyncio.run(score_items(backend, chunk, weights, cache)))
            bar.update(len(chunk))
            log.info("judged %d/%d responses (%s)", len(rows), len(items), label, extra=UI_ONLY)
            check_so_far(rows, len(items), limit, f"{label} responses")
    return rows


def score_summary(results: pd.DataFrame) -> dict:
    """Means, violation rates, breakdowns by tier, scope and category, the judge-gaming
    indicators and the judge's failures of a results table (failed judgements excluded)."""
    ok = results[results["judge_ok"]]
    dims = [*rubric.DIMENSIONS, "combined"]
    violations = [f"{d}_violation" for d in rubric.DIMENSIONS]
    return {
        "means": {d: _mean(ok[d]) for d in dims},
        "violation_rates": {v: _mean(ok[v].astype(float)) for v in violations},
        "by_tier": _breakdown(ok, "tier", dims),
        "by_scope": _breakdown(ok, "scope", dims),
        "by_category": _breakdown(ok, "category", dims),
        "gaming_indicators": indicator_rates(results),
        "judge_failures": int((~results["judge_ok"]).sum()),
        "judge_failure_rate": float((~results["judge_ok"]).mean()),
    }


def score_line(value: float | None) -> str:
    """A mean score for a log line; none when every judgement failed."""
    return "n/a (no judgement succeeded)" if value is None else f"{value:.3f}"


def _mean(series: pd.Series) -> float | None:
    return float(series.mean()) if len(series) else None


def _breakdown(frame: pd.DataFrame, column: str, dims: list[str]) -> dict:
    grouped = frame.groupby(column)
    table = grouped[dims].mean().round(6)
    table["n"] = grouped.size()
    return {
        str(k): {c: (int(v) if c == "n" else float(v)) for c, v in row.items()}
        for k, row in table.iterrows()
    }
