"""The ArGen pipeline flow: curate -> baseline eval -> train -> merge -> aligned eval -> report
-> release (champion/challenger on the recipe's model line)."""

from pathlib import Path
from typing import Any, cast

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.client.schemas.objects import FlowRun
from prefect.deployments import run_deployment
from prefect.states import Completed, State

from argen import console
from argen.config import Config, load_config
from argen.errors import ArgenError
from argen.outputs import Report, ReportSummary
from argen.pipeline import is_complete, run_pipeline, stage, stage_key
from argen.reporting.release import Outcome, line_name, losses, release
from flows.common import JudgeBackend, form_overrides
from tasks import stages as t
from tasks.progress import PrefectProgress

DEPLOYMENTS = {
    "sft": "sft_deployment",
    "prefer": "prefer_deployment",
    "train": "train_deployment",
    "evaluate": "evaluate_deployment",
}
"""Stages the recipe may send to another work pool, and the orchestration field naming the
deployment (the train deployment merges too: its merge is then found complete here)."""


def on_deployment(deployment: str, name: str, config: Config, /, **inputs: Any) -> dict:
    """Stage `name` as the deployment `deployment` (on its own work pool), handed the resolved
    config; waits for it and returns the stage's reference. Anything but Completed is an error."""
    before, out = stage_key(name, config, **inputs)
    reused = is_complete(name, out)
    parameters: dict[str, Any] = {k: str(v) for k, v in inputs.items()}
    parameters["config"] = config.model_dump(mode="json")
    limits = config.orchestration
    timeout = limits.train_timeout_s if name == "train" else limits.stage_timeout_s
    with console.stage(f"{t.title(name, inputs)} on {deployment}", out, reused=reused):
        get_run_logger().info("running deployment %s", deployment)
        run = cast(FlowRun, run_deployment(deployment, parameters=parameters, timeout=timeout))
        if not run.state or not run.state.is_completed():
            raise ArgenError(f"deployment {deployment} ended {run.state and run.state.name}")
        out = written_output(deployment, name, config, before, out, inputs)
    return t.ref(name, out, reused)


def written_output(
    deployment: str, name: str, config: Config, before: dict, out: Path, inputs: dict
) -> Path:
    """Where the deployment wrote stage `name`: the folder keyed before it ran, unless an input's
    content changed meanwhile (the worker then keyed, and wrote, another folder: the changed
    parts are named). Anything but a complete output there is an error, raised here rather than
    at the next stage. The inputs are hashed again only when that folder is not complete."""
    if is_complete(name, out):
        return out
    after, moved = stage_key(name, config, **inputs)
    if after != before:
        changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        out = moved
        get_run_logger().warning(
            "%s: %s changed while deployment %s ran; its output is %s",
            name,
            ", ".join(changed),
            deployment,
            out,
        )
    if not is_complete(name, out):
        raise ArgenError(
            f"deployment {deployment} completed but left no complete {name} output at {out}: "
            "an input changed while it ran, or the worker sees other files than this flow"
        )
    return out


class PrefectStages:
    """The pipeline's stages as Prefect tasks, or as deployments on the recipe's work pools
    (`argen.pipeline.run_pipeline` keeps the order); remembers each stage's reference, so the
    report artifact can say whether anything was recomputed."""

    def __init__(self) -> None:
        self.refs: list[dict] = []

    def run(self, name: str, config: Config, /, **inputs: Any) -> Path:
        field = DEPLOYMENTS.get(name)
        deployment = getattr(config.orchestration, field) if field else None
        if deployment:
            ref = on_deployment(deployment, name, config, **inputs)
        else:
            if "callbacks" in stage(name).options:  # training shows its progress in the UI
                inputs["callbacks"] = (PrefectProgress(),)
            ref = t.run(name, config, **inputs)
        self.refs.append(ref)
        return Path(ref["path"])


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def score_rows(summary: ReportSummary) -> list[dict]:
    """The summary's score table, rounded for an artifact."""
    return [
        {
            "dimension": s.dimension,
            "baseline": _rounded(s.baseline),
            "aligned": _rounded(s.aligned),
            "difference": _rounded(s.difference),
            "ci_low": _rounded(s.ci_low),
            "ci_high": _rounded(s.ci_high),
            "holm_p": s.p_holm,
        }
        for s in summary.scores
    ]


def publish(report_dir: Path, summary: ReportSummary, refs: list[dict]) -> None:
    """The report as a keyed (versioned) markdown artifact and a summary table artifact; a run
    whose every stage was reused says so at the top."""
    markdown = Report(report_dir).markdown.read_text()
    markdown = "\n".join(line for line in markdown.splitlines() if not line.startswith("!["))
    if all(r["reused"] for r in refs):
        markdown = (
            "> **Nothing recomputed**: every stage's output for these inputs already existed "
            "(same data, recipe and code), so this run reused them.\n\n" + markdown
        )
    create_markdown_artifact(
        markdown=markdown, key="argen-report", description=f"Comparison report ({report_dir})"
    )
    gate = "passed" if summary.gate_passed else "failed"
    create_table_artifact(
        table=score_rows(summary),
        key="argen-summary",
        description=f"Scores, aligned vs baseline; gate {gate}",
    )


def publish_challenge(line: str, outcome: Outcome) -> None:
    """The paired comparison of the candidate with the champion it challenged, as a markdown
    section and a table artifact."""
    if outcome.challenge is None or outcome.champion is None:
        return
    summary = Report(outcome.challenge).summary()
    worse = losses(summary)
    rows = score_rows(summary)
    for row in rows:
        row["champion"], row["candidate"] = row.pop("baseline"), row.pop("aligned")
    champion = outcome.champion
    lines = [f"## Champion comparison ({line} line)", ""]
    lines += [f"Champion: `{champion.model_dir}` (promoted {champion.at}).", ""]
    lines += [f"- worse beyond noise: {w}" for w in worse] or ["- not worse on any dimension"]
    create_markdown_artifact(markdown="\n".join(lines), key="argen-champion-comparison")
    create_table_artifact(
        table=rows, key="argen-champion", description="Candidate vs champion, paired, same split"
    )


def final_state(outcome: Outcome) -> State:
    """The run's final state, named for the release outcome (the UI shows it at a glance), with
    an `argen-release` artifact saying why and linking the report and its reading sheet."""
    name, message, report_dir = outcome.name, outcome.message, outcome.report
    get_run_logger().info("release: %s: %s", name, message)
    sheet = Report(report_dir).reading_sheet
    create_markdown_artifact(
        markdown=f"## Release: {name}\n\n{message}\n\nReport: `{report_dir}`\n\n"
        f"Reading sheet (both models' answers with the audit's flags; read it before promoting): "
        f"`{sheet}`",
        key="argen-release",
        description=f"Release outcome: {name}",
    )
    return Completed(name=name, message=message, data=str(report_dir))


@flow(
    name="argen-pipeline",
    description="Align a model as a healthcare assistant and prove it: curate, evaluate the "
    "baseline, train with GRPO, merge, evaluate the aligned model, compare, release.",
)
def pipeline(
    recipe: str = "default",
    judge_backend: JudgeBackend | None = None,
    model: str | None = None,
    max_steps: int | None = None,
    overrides: list[str] | None = None,
) -> State:
    """Run the whole ArGen pipeline, publish its report and release on the recipe's model line.

    Args:
        recipe: bundled recipe name (default, gpu) or path to a YAML recipe; also the model line.
        judge_backend: judge for rewards and scores (default: the recipe's).
        model: base model spec or Hugging Face directory (default: the recipe's).
        max_steps: GRPO optimizer steps (default: the recipe's).
        overrides: more ``section.field=value`` config overrides.
    """
    extra = form_overrides(judge_backend, model, max_steps, overrides)
    config = load_config(recipe, extra)
    line = line_name(recipe)
    runner = PrefectStages()
    outputs = run_pipeline(config, line, runner)
    publish(outputs["report"], Report(outputs["report"]).summary(), runner.refs)
    outcome = release(config, line, outputs, runner)
    publish_challenge(line, outcome)
    return final_state(outcome)
