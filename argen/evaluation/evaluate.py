"""Evaluation: a model and a scenarios parquet -> per-item ``results.parquet`` + ``summary.json``.

The baseline and the aligned model go through exactly this function with the same settings;
the summary records those settings so that a comparison can check they match.
"""

import json
import logging
import time
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
from tqdm.auto import tqdm

from argen.atomic import atomic_dir
from argen.config import Config
from argen.console import UI_ONLY
from argen.data.curate import write_parquet
from argen.data.schema import GIVEN, SCENARIO_COLUMNS
from argen.errors import ArgenError, machine_faults
from argen.evaluation.indicators import indicator_columns
from argen.evaluation.results import results_frame
from argen.evaluation.scoring import judge_frame, score_line, score_summary
from argen.generation.generate import generate, load_model
from argen.generation.prompting import system_prompt
from argen.hashing import dir_sha256, file_sha256, json_sha256
from argen.judging import rubric
from argen.judging.scoring import check_failure_rate, make_backend
from argen.machine import hardware
from argen.models import check_model_dir
from argen.outputs import Evaluation
from argen.version import code_version

log = logging.getLogger(__name__)


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

    results = results_frame(frame, judged)
    timings = {"generation_seconds": generation_seconds, "judging_seconds": judging_seconds}
    summary = summarize(results, settings, timings, label, model_dir, scenarios)
    with machine_faults(out_dir), atomic_dir(out_dir) as tmp:  # a full disk: argen: error
        write_parquet(results, tmp / Evaluation.RESULTS)
        (tmp / Evaluation.SIDECAR).write_text(json.dumps(summary, indent=2) + "\n")
    log.info(
        "evaluated %s on %d scenarios: combined %s -> %s",
        label,
        len(results),
        score_line(summary["means"]["combined"]),
        out_dir,
    )
    return out_dir


def summarize(
    results: pd.DataFrame,
    settings: dict,
    timings: dict,
    label: str,
    model_dir: Path,
    scenarios: Path,
) -> dict:
    """Scores (`score_summary`), lengths, truncation, timings and settings."""
    tokens = int(results["n_response_tokens"].sum())
    return {
        "label": label,
        "model_dir": str(model_dir),
        "model_sha256": dir_sha256(model_dir),
        "scenarios": str(scenarios),
        "n": len(results),
        **score_summary(results),
        "truncation_rate": float(results["truncated"].mean()),
        "mean_response_tokens": float(results["n_response_tokens"].mean()),
        "timings": {
            **timings,
            "response_tokens": tokens,
            "tokens_per_second": tokens / max(timings["generation_seconds"], 1e-9),
        },
        "settings": settings,
        "code_version": code_version(),
        "hardware": hardware(),
    }
