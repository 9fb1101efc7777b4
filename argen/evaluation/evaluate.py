"""Evaluation: a model and a scenarios parquet -> per-item ``results.parquet`` + ``summary.json``.

The baseline and the aligned model go through exactly this function with the same settings;
the summary records those settings so that a comparison can check they match.
"""

import asyncio
import json
import logging
import time
from contextlib import nullcontext
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
from tqdm.auto import tqdm

from argen.atomic import atomic_dir
from argen.config import Config
from argen.console import UI_ONLY
from argen.data.curate import write_parquet
from argen.data.schema import GENERATION_COLUMNS, GIVEN, JUDGE_COLUMNS, SCENARIO_COLUMNS
from argen.errors import ArgenError, machine_faults
from argen.evaluation.indicators import indicator_columns, indicator_rates
from argen.generation.generate import generate, load_model
from argen.generation.prompting import system_prompt
from argen.hashing import file_sha256, json_sha256
from argen.judging import rubric
from argen.judging.base import JudgeItem, score_items
from argen.judging.scoring import check_failure_rate, check_so_far, make_backend, open_cache
from argen.models import check_model_dir
from argen.outputs import Evaluation
from argen.version import code_version

log = logging.getLogger(__name__)

JUDGE_CHUNK = 64
"""Items per judging call: the unit of progress reporting."""
FIRST_CHUNK = 16
"""The first call is smaller: a dead judge is noticed after one round of requests."""


def read_scenarios(path: Path) -> pd.DataFrame:
    """A scenarios parquet, checked for the DESIGN schema and at least one row (one without
    `label_source` holds labels given by its author)."""
    if not path.is_file():
        raise ArgenError(f"scenarios file {path} does not exist")
    try:
        frame = pq.read_table(path).to_pandas()
    except Exception as exc:  # pyarrow raises several types for unreadable files
        raise ArgenError(f"scenarios file {path} is not a readable parquet file: {exc}") from None
    if "label_source" not in frame.columns:  # written by hand or by an older ArGen
        frame = frame.assign(label_source=GIVEN)
    missing = [c for c in SCENARIO_COLUMNS if c not in frame.columns]
    if missing:
        raise ArgenError(f"scenarios file {path} lacks column(s) {', '.join(missing)}")
    if frame.empty:
        raise ArgenError(
            f"scenarios file {path} has no rows (curated prompts whose labels were proposed stay "
            "out of the test split until reviewed: see the curation's review.csv)"
        )
    return frame[list(SCENARIO_COLUMNS)]


def settings_record(config: Config, scenarios: Path, judge_name: str) -> dict:
    """Everything that must match between a baseline and an aligned evaluation."""
    return {
        "generation": config.generation.model_dump(mode="json"),
        "system_prompt_sha256": json_sha256(system_prompt(config.generation)),
        "judge": judge_name,
        "judge_weights": config.judge.weights.model_dump(),
        "rubric_version": rubric.RUBRIC_VERSION,
        "scenarios_sha256": file_sha256(scenarios),
    }


def evaluate(
    config: Config, model_dir: Path, scenarios: Path, out_dir: Path, label: str = "model"
) -> Path:
    """Generate a response per scenario, judge them, and write results and summary atomically."""
    check_model_dir(model_dir)
    frame = read_scenarios(scenarios)
    backend = make_backend(config.judge)  # an unknown backend or a missing key fails here
    settings = settings_record(config, scenarios, backend.name)

    model, tokenizer = load_model(model_dir, precision=config.generation.precision)
    started = time.perf_counter()
    with tqdm(total=len(frame), desc=f"generate ({label})", unit="prompt") as bar:

        def progress(n: int) -> None:
            bar.update(n)
            log.info("generated %d/%d responses (%s)", bar.n, len(frame), label, extra=UI_ONLY)

        generated = generate(
            model, tokenizer, frame["prompt"].tolist(), config.generation, progress
        )
    generation_seconds = time.perf_counter() - started

    frame = frame.assign(
        model=label,
        response=[g.response for g in generated],
        n_prompt_tokens=[g.n_prompt_tokens for g in generated],
        n_response_tokens=[g.n_response_tokens for g in generated],
        truncated=[g.truncated for g in generated],
        generation_seconds=[g.seconds for g in generated],
    )
    frame = frame.join(indicator_columns(frame))
    started = time.perf_counter()
    judged = judge_frame(config, backend, frame, label)
    judging_seconds = time.perf_counter() - started
    check_failure_rate(judged, config.judge.max_failure_rate, f"{label} responses")

    results = pd.concat(
        [frame.reset_index(drop=True), pd.DataFrame(judged).drop(columns=["id"])], axis=1
    )
    columns = [
        *SCENARIO_COLUMNS,
        *GENERATION_COLUMNS,
        *rubric.RAW_FIELDS,
        *rubric.SCORE_FIELDS,
        *JUDGE_COLUMNS,
    ]
    results = results[columns]
    timings = {"generation_seconds": generation_seconds, "judging_seconds": judging_seconds}
    summary = summarize(results, settings, timings, label, model_dir, scenarios)
    with machine_faults(out_dir), atomic_dir(out_dir) as tmp:  # a full disk: argen: error
        write_parquet(results, tmp / Evaluation.RESULTS)
        (tmp / Evaluation.SIDECAR).write_text(json.dumps(summary, indent=2) + "\n")
    log.info(
        "evaluated %s on %d scenarios: combined %s -> %s",
        label,
        len(results),
        _score(summary["means"]["combined"]),
        out_dir,
    )
    return out_dir


def judge_frame(config: Config, backend, frame: pd.DataFrame, label: str) -> list[dict]:
    """Judge every row of a generated frame, in chunks so progress shows."""
    items = [JudgeItem(r.id, r.prompt, r.response, r.tier, r.scope) for r in frame.itertuples()]
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


def summarize(
    results: pd.DataFrame,
    settings: dict,
    timings: dict,
    label: str,
    model_dir: Path,
    scenarios: Path,
) -> dict:
    """Means, violation rates, breakdowns, lengths, failures, timings and settings."""
    ok = results[results["judge_ok"]]
    dims = [*rubric.DIMENSIONS, "combined"]
    violations = [f"{d}_violation" for d in rubric.DIMENSIONS]
    tokens = int(results["n_response_tokens"].sum())
    return {
        "label": label,
        "model_dir": str(model_dir),
        "scenarios": str(scenarios),
        "n": len(results),
        "means": {d: _mean(ok[d]) for d in dims},
        "violation_rates": {v: _mean(ok[v].astype(float)) for v in violations},
        "by_tier": _breakdown(ok, "tier", dims),
        "by_scope": _breakdown(ok, "scope", dims),
        "by_category": _breakdown(ok, "category", dims),
        "truncation_rate": float(results["truncated"].mean()),
        "mean_response_tokens": float(results["n_response_tokens"].mean()),
        "gaming_indicators": indicator_rates(results),
        "judge_failures": int((~results["judge_ok"]).sum()),
        "judge_failure_rate": float((~results["judge_ok"]).mean()),
        "timings": {
            **timings,
            "response_tokens": tokens,
            "tokens_per_second": tokens / max(timings["generation_seconds"], 1e-9),
        },
        "settings": settings,
        "code_version": code_version(),
    }


def _score(value: float | None) -> str:
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
