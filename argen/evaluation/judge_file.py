"""`argen judge FILE`: score answers a team already has with the configured judge, into a
results file of the evaluation's schema, so that `argen report` compares two such files (or one
with an evaluation) without generating anything again.

The rows are read and checked first (`argen.evaluation.responses`), before any judge loads. What
evaluation measures while generating is unknown here and stays missing, never made up:
``n_prompt_tokens``, ``n_response_tokens`` and ``generation_seconds`` are NaN, ``truncated`` is
null, the summary's truncation rate and mean length are null and its settings have no
generation. The judge-gaming indicators are read from the texts, as in evaluation.
"""

import json
import logging
import math
import time
from pathlib import Path

import pandas as pd

from argen.atomic import atomic_dir
from argen.config import Config
from argen.data.curate import write_parquet
from argen.errors import machine_faults
from argen.evaluation.indicators import indicator_columns
from argen.evaluation.responses import Responses, read_responses
from argen.evaluation.results import results_frame
from argen.evaluation.scoring import judge_frame, judge_items, score_line, score_summary
from argen.hashing import file_sha256, json_sha256
from argen.judging import rubric
from argen.judging.base import count_cached
from argen.judging.scoring import check_failure_rate, make_backend, open_cache
from argen.outputs import Evaluation
from argen.version import code_version

log = logging.getLogger(__name__)

UNKNOWN_GENERATION = {
    "n_prompt_tokens": math.nan,
    "n_response_tokens": math.nan,
    "truncated": None,
    "generation_seconds": math.nan,
}
"""What evaluation records while generating, unknown for answers it did not generate."""


def judge_file(
    config: Config,
    responses: Path,
    out_dir: Path,
    label: str,
    tier: str | None = None,
    scope: str | None = None,
) -> Path:
    """Judge every (prompt, response) row of `responses` and write results and summary
    atomically into `out_dir`; rows without a tier or scope take `tier` / `scope`."""
    read = read_responses(responses, tier, scope)
    log.info("read %d rows from %s", len(read.frame), responses)
    for name, (value, count) in read.assumed.items():
        log.warning("%d row(s) name no %s: scored as %s %s (--%s)", count, name, name, value, name)
    backend = make_backend(config.judge)  # an unknown backend or a missing key fails here
    frame = read.frame.assign(model=label, **UNKNOWN_GENERATION)
    frame = frame.join(indicator_columns(frame))
    cached = count_cached(backend, judge_items(frame), open_cache(config))
    log.info(
        "judging %d responses with %s (%d already in the judge cache)",
        len(frame),
        backend.name,
        cached,
    )
    started = time.perf_counter()
    judged = judge_frame(config, backend, frame, label)
    seconds = time.perf_counter() - started
    check_failure_rate(judged, config.judge.max_failure_rate, f"{label} responses")
    results = results_frame(frame, judged)
    summary = {
        **summarize(results, label, responses),
        "responses": {"file": str(responses), "cached": cached, "assumed": _assumed(read)},
        "timings": {"judging_seconds": seconds},
        "settings": settings_record(config, responses, results, backend.name),
    }
    with machine_faults(out_dir), atomic_dir(out_dir) as tmp:  # a full disk: argen: error
        write_parquet(results, tmp / Evaluation.RESULTS)
        (tmp / Evaluation.SIDECAR).write_text(json.dumps(summary, indent=2) + "\n")
    log.info(
        "judged %d responses in %.1f s (%d from the cache, %d failed): combined %s",
        len(results),
        seconds,
        cached,
        summary["judge_failures"],
        score_line(summary["means"]["combined"]),
    )
    log.info("results: %s", Evaluation(out_dir).results)
    return out_dir


def summarize(results: pd.DataFrame, label: str, responses: Path) -> dict:
    """The evaluation summary's fields that judged answers have: scores, no lengths."""
    return {
        "label": label,
        "model_dir": None,
        "scenarios": str(responses),
        "n": len(results),
        **score_summary(results),
        "truncation_rate": None,
        "mean_response_tokens": None,
        "code_version": code_version(),
    }


def _assumed(read: Responses) -> dict:
    """For tier and scope: the value rows without one took and how many took it."""
    return {name: {"value": v, "rows": n} for name, (v, n) in read.assumed.items()}


def settings_record(config: Config, responses: Path, results: pd.DataFrame, judge: str) -> dict:
    """What must match between two results a report compares: the judge, its weights and
    rubric, and the scenarios judged (ids, prompts with whitespace collapsed, tiers, scopes and
    categories), whichever file they came from; no generation settings (none are known)."""
    scenarios = sorted(
        (r.id, " ".join(r.prompt.split()), r.tier, r.scope, r.category)
        for r in results.itertuples()
    )
    return {
        "generation": None,
        "system_prompt_sha256": None,
        "judge": judge,
        "judge_weights": config.judge.weights.model_dump(),
        "rubric_version": rubric.RUBRIC_VERSION,
        "scenarios_sha256": json_sha256(scenarios),
        "responses_sha256": file_sha256(responses),
    }
