"""Model lines: one per recipe, each with its champion (the current model) and an append-only
history of promotions and rollbacks (which model, which report, when, the figures).

A line is a recipe because a recipe fixes the base model, the training budget and the judge:
a 12-step CPU `default` run can never replace the `gpu` recipe's model. The champion is the
last promoted model not rolled back; the history is replayed to find it, never rewritten.

`release` decides what becomes of a pipeline run's candidate (promoted, gate failed, lost to
champion) and returns that outcome; whoever ran the pipeline (`argen run` in this process, or the
Prefect flow, which publishes it and names its final state after it) only reports it."""

import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from argen.atomic import atomic_file
from argen.config import Config
from argen.errors import ArgenError
from argen.outputs import CuratedSplits, Evaluation, Report, ReportSummary, check_inputs
from argen.pipeline import InProcess, StageRunner

GATE_FAILED = "Gate failed"
LOST = "Lost to champion"
PROMOTED = "Promoted"
ALREADY_CHAMPION = "Completed"


def line_name(recipe: str) -> str:
    """A recipe's model line: a bundled recipe's name (dots kept: ``gpu-qwen0.5b``) or a recipe
    file's name without its ``.yaml``."""
    path = Path(recipe)
    return path.stem if path.suffix in {".yaml", ".yml"} else path.name


def line_dir(config: Config, line: str) -> Path:
    """Where a model line's pointer and history live."""
    if not line or "/" in line or line.startswith("."):
        raise ArgenError(f"model line name {line!r} is not a plain name")
    return config.storage.root / "models" / line


class LineEvent(BaseModel):
    """One row of a line's history (`history.jsonl`): a promotion (with the report and figures
    it rests on, the champion comparison and the model it replaced) or a rollback. The champion
    pointer (`champion.json`) is the current champion's promotion."""

    model_config = ConfigDict(extra="allow")

    event: Literal["promote", "rollback"]
    model_dir: str
    line: str
    at: str
    replaced: str | None = None
    report: str | None = None
    challenge_report: str | None = None
    figures: dict[str, float | None] = {}


def history(config: Config, line: str) -> list[LineEvent]:
    """Every promotion and rollback of the line, oldest first."""
    path = line_dir(config, line) / "history.jsonl"
    if not path.is_file():
        return []
    rows = [row for row in path.read_text().splitlines() if row.strip()]
    return [LineEvent.model_validate_json(row) for row in rows]


def champions(events: list[LineEvent]) -> list[LineEvent]:
    """The stack of champions the history leaves: a promotion pushes, a rollback pops."""
    stack: list[LineEvent] = []
    for event in events:
        if event.event == "promote":
            stack.append(event)
        else:
            stack.pop()
    return stack


def champion(config: Config, line: str) -> LineEvent | None:
    """The line's current model (its promotion record), or None before any promotion."""
    stack = champions(history(config, line))
    return stack[-1] if stack else None


def _append(
    config: Config, line: str, event: Literal["promote", "rollback"], model_dir: str, **fields: Any
) -> LineEvent:
    """Append one event to the history (flushed to disk) and update the champion pointer."""
    directory = line_dir(config, line)
    directory.mkdir(parents=True, exist_ok=True)
    at = datetime.now(UTC).isoformat(timespec="seconds")
    row = LineEvent(event=event, model_dir=model_dir, line=line, at=at, **fields)
    with open(directory / "history.jsonl", "a") as out:
        out.write(json.dumps(_row(row)) + "\n")
        out.flush()
        os.fsync(out.fileno())
    current = champion(config, line)
    with atomic_file(directory / "champion.json") as tmp:
        tmp.write_text(json.dumps(_row(current) if current else None, indent=2) + "\n")
    return row


def _row(event: LineEvent) -> dict:
    """An event as its history row: the fields it was given, in the order of old rows."""
    order = ("event", "model_dir", "report", "challenge_report", "replaced", "figures")
    data = event.model_dump(exclude_unset=True)
    first = {k: data.pop(k) for k in order if k in data}
    return first | data


def promote(
    config: Config, line: str, model_dir: Path, report_dir: Path, challenge: Path | None = None
) -> LineEvent:
    """Make `model_dir` the line's champion, citing its report (and the comparison with the
    champion it replaces, if there was one) and the report's score figures."""
    summary = Report(report_dir).summary()
    previous = champion(config, line)
    return _append(
        config,
        line,
        "promote",
        str(model_dir),
        report=str(report_dir),
        challenge_report=str(challenge) if challenge else None,
        replaced=previous.model_dir if previous else None,
        figures={score.dimension: score.aligned for score in summary.scores},
    )


def rollback(config: Config, line: str) -> LineEvent:
    """Restore the champion before the current one; the rollback is recorded in the history."""
    stack = champions(history(config, line))
    if len(stack) < 2:
        raise ArgenError(f"model line {line!r} has no earlier champion to roll back to")
    return _append(config, line, "rollback", stack[-2].model_dir, replaced=stack[-1].model_dir)


def losses(challenge: ReportSummary) -> list[str]:
    """Dimensions on which the challenger is worse than the champion beyond noise (the paired
    comparison's verdict: Holm-adjusted p below alpha and the whole interval below zero)."""
    return [
        f"{v.dimension} {v.difference:+.3f} (95% CI [{v.ci_low:+.3f}, {v.ci_high:+.3f}])"
        for v in challenge.verdict
        if v.call == "worse"
    ]


@dataclass(frozen=True)
class Outcome:
    """How a release ended: its name (`PROMOTED`, `GATE_FAILED`, `LOST`, or `ALREADY_CHAMPION`
    when the candidate already is the champion), why, the candidate's report, and the champion
    it was compared with and that comparison's report, when there was one."""

    name: str
    message: str
    report: Path
    champion: LineEvent | None = None
    challenge: Path | None = None


def release(
    config: Config, line: str, outputs: dict[str, Path], runner: StageRunner | None = None
) -> Outcome:
    """Promote a pipeline run's merged model (`outputs` as `run_pipeline` returns them) if its
    release gate passed and it is not worse than the line's champion beyond noise. The champion
    is evaluated again on this run's test split with this judge, through `runner` (this process
    by default), and compared with the candidate, paired."""
    report_dir, merged = outputs["report"], outputs["merge"]
    check_inputs({"report": report_dir, "merged model": merged})
    summary = Report(report_dir).summary()
    if not summary.gate_passed:
        failed = [f"{g.rule}: {g.evidence}" for g in summary.gate if not g.passed]
        message = "release gate failed, the champion stays: " + "; ".join(failed)
        return Outcome(GATE_FAILED, message, report_dir)
    current = champion(config, line)
    if current and current.model_dir == str(merged):
        return Outcome(ALREADY_CHAMPION, f"{merged} is already the {line} champion", report_dir)
    challenge = None
    if current:
        run = (runner or InProcess()).run
        test = CuratedSplits(outputs["curate"]).test
        judged = run("evaluate", config, model=current.model_dir, scenarios=test, label="champion")
        challenge = run(
            "report",
            config,
            baseline=Evaluation(judged).results,
            aligned=Evaluation(outputs["aligned"]).results,
            name=f"{line}-challenge",
        )
        worse = losses(Report(challenge).summary())
        if worse:
            message = f"worse than the {line} champion beyond noise: " + "; ".join(worse)
            return Outcome(LOST, message, report_dir, current, challenge)
    promote(config, line, merged, report_dir, challenge)
    message = f"{merged} is now the {line} champion"
    return Outcome(PROMOTED, message, report_dir, current, challenge)
