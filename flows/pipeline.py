"""The ArGen pipeline flow: curate -> baseline eval -> train -> merge -> aligned eval -> report."""

import json
from pathlib import Path

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.deployments import run_deployment

from argen import stages
from argen.config import Config, load_config
from argen.errors import ArgenError
from argen.models import resolve_model
from argen.registry import promote
from flows.common import JudgeBackend, form_overrides
from flows.train import train_flow
from tasks import stages as t


def train_and_merge(config: Config, recipe: str, overrides: list[str], curated: str) -> str:
    """Inline, or as the GPU deployment when ``orchestration.train_deployment`` names one."""
    name = config.orchestration.train_deployment
    if not name:
        return train_flow(recipe, overrides, config.model.base, curated)
    get_run_logger().info("training on deployment %s", name)
    run = run_deployment(
        name,
        parameters={
            "recipe": recipe,
            "overrides": overrides,
            "model": config.model.base,
            "curated": curated,
        },
        timeout=config.orchestration.train_timeout_s,
    )
    if not run.state or not run.state.is_completed():
        raise ArgenError(f"training deployment {name} ended {run.state and run.state.name}")
    model_dir = resolve_model(config.model.base)
    curated_dir = Path(curated)
    adapter = stages.train_out(
        config, model_dir, curated_dir / "train.parquet", curated_dir / "validation.parquet"
    )
    return str(stages.merge_out(config, model_dir, adapter))


def publish(report_dir: Path, gate_passed: bool) -> None:
    """The report as a keyed (versioned) markdown artifact and a summary table artifact."""
    markdown = (report_dir / "report.md").read_text()
    markdown = "\n".join(line for line in markdown.splitlines() if not line.startswith("!["))
    create_markdown_artifact(
        markdown=markdown, key="argen-report", description=f"Comparison report ({report_dir})"
    )
    summary = json.loads((report_dir / "summary.json").read_text())
    rows = [
        {
            "dimension": s["dimension"],
            "baseline": round(s["baseline"], 3),
            "aligned": round(s["aligned"], 3),
            "difference": round(s["difference"], 3),
            "ci_low": round(s["ci_low"], 3),
            "ci_high": round(s["ci_high"], 3),
            "holm_p": s["p_holm"],
        }
        for s in summary["scores"]
    ]
    create_table_artifact(
        table=rows,
        key="argen-summary",
        description=f"Scores, aligned vs baseline; gate {'passed' if gate_passed else 'failed'}",
    )


@flow(
    name="argen-pipeline",
    description="Align a model as a healthcare assistant and prove it: curate, evaluate the "
    "baseline, train with GRPO, merge, evaluate the aligned model, compare.",
)
def pipeline(
    recipe: str = "default",
    judge_backend: JudgeBackend | None = None,
    model: str | None = None,
    max_steps: int | None = None,
    overrides: list[str] | None = None,
) -> str:
    """Run the whole ArGen pipeline and publish its report.

    Args:
        recipe: bundled recipe name (default, gpu) or path to a YAML recipe.
        judge_backend: judge for rewards and scores (default: the recipe's).
        model: base model spec or Hugging Face directory (default: the recipe's).
        max_steps: GRPO optimizer steps (default: the recipe's).
        overrides: more ``section.field=value`` config overrides.
    """
    log = get_run_logger()
    extra = form_overrides(judge_backend, model, max_steps, overrides)
    config = load_config(recipe, extra)
    name = Path(recipe).stem
    curated = t.curate(config)["path"]
    test = str(Path(curated) / "test.parquet")
    baseline = t.evaluate(config, config.model.base, test, "baseline")
    merged = train_and_merge(config, recipe, extra, curated)
    aligned = t.evaluate(config, merged, test, "aligned")
    adapter = Path(json.loads((Path(merged) / "merge_manifest.json").read_text())["adapter"])
    report = t.report(
        config,
        str(Path(baseline["path"]) / "results.parquet"),
        str(Path(aligned["path"]) / "results.parquet"),
        str(adapter / "training_log.parquet"),
        name,
    )
    report_dir = Path(report["path"])
    summary = json.loads((report_dir / "summary.json").read_text())
    publish(report_dir, summary["gate_passed"])
    if summary["gate_passed"]:
        pointer = promote(config, Path(merged), report_dir)
        log.info("release gate passed: %s is now the current model (%s)", merged, pointer)
    else:
        failed = [g["rule"] + ": " + g["evidence"] for g in summary["gate"] if not g["passed"]]
        log.warning("release gate failed, the current model stays: %s", "; ".join(failed))
    return str(report_dir)
