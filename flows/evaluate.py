"""Evaluation and reporting as flows of their own (their own deployments)."""

from pathlib import Path

from prefect import flow

from argen.config import load_config
from tasks import stages as t


@flow(
    name="argen-evaluate",
    description="Generate and judge one model's responses to a "
    "scenarios file; writes results.parquet and summary.json.",
)
def evaluate_flow(
    model: str,
    scenarios: str,
    label: str = "model",
    recipe: str = "default",
    overrides: list[str] | None = None,
) -> str:
    """Evaluate one model.

    Args:
        model: model spec or Hugging Face directory.
        scenarios: scenarios parquet (normally a curated test split).
        label: name of the model in the results.
        recipe: bundled recipe name or path to a YAML recipe.
        overrides: ``section.field=value`` config overrides.
    """
    config = load_config(recipe, overrides or [])
    return t.evaluate(config, model, scenarios, label)["path"]


@flow(
    name="argen-report",
    description="Compare a baseline and an aligned results file: "
    "paired statistics, verdict, release gate, plots.",
)
def report_flow(
    baseline: str,
    aligned: str,
    training_log: str | None = None,
    name: str = "argen",
    recipe: str = "default",
    overrides: list[str] | None = None,
) -> str:
    """Compare two results files.

    Args:
        baseline: the baseline's results.parquet.
        aligned: the aligned model's results.parquet.
        training_log: training_log.parquet to plot, if any.
        name: report name (its directory is reports/<name>-<key>).
        recipe: bundled recipe name or path to a YAML recipe.
        overrides: ``section.field=value`` config overrides.
    """
    config = load_config(recipe, overrides or [])
    out = t.report(config, baseline, aligned, training_log, name)["path"]
    return str(Path(out))
