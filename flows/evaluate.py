"""Evaluation and reporting as flows of their own (their own deployments)."""

from pathlib import Path
from typing import Any

from prefect import flow

from argen.config import Config, load_config
from tasks import stages as t


def flow_config(config: dict[str, Any] | None, recipe: str, overrides: list[str] | None) -> Config:
    """The configuration a flow runs with: the resolved one a pipeline hands its deployments
    (so a recipe edited meanwhile cannot change it), else the run form's recipe and overrides."""
    if config is not None:
        return Config.model_validate(config)
    return load_config(recipe, overrides or [])


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
    config: dict[str, Any] | None = None,
) -> str:
    """Evaluate one model.

    Args:
        model: model spec or Hugging Face directory.
        scenarios: scenarios parquet (normally a curated test split).
        label: name of the model in the results.
        recipe: bundled recipe name or path to a YAML recipe.
        overrides: ``section.field=value`` config overrides.
        config: a resolved configuration (what the pipeline passes); replaces recipe/overrides.
    """
    resolved = flow_config(config, recipe, overrides)
    return t.run("evaluate", resolved, model=model, scenarios=Path(scenarios), label=label)["path"]


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
    log = Path(training_log) if training_log else None
    inputs = {"baseline": Path(baseline), "aligned": Path(aligned), "training_log": log}
    return t.run("report", config, name=name, **inputs)["path"]
