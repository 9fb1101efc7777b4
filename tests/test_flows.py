"""The flows without a server: a deployment is handed the resolved configuration (never the recipe
and overrides again, so a recipe edited mid-run cannot give the worker other keys), and the
stages a recipe sends to another pool go there."""

import logging
from pathlib import Path
from types import SimpleNamespace
from typing import get_args

import pytest
from prefect.utilities.callables import parameter_schema

import flows.pipeline
from argen.config import Config, JudgeConfig, load_config
from argen.errors import ArgenError
from flows.evaluate import flow_config


@pytest.mark.parametrize(
    "recipe", ["default", "cpu-warm", "gpu", "gpu-qwen0.5b", "gpu-qwen1.5b", "gpu-qwen1.5b-reader"]
)
def test_a_resolved_config_survives_its_trip_to_a_deployment(recipe):
    config = load_config(recipe, ["train.max_steps=3"])
    assert flow_config(config.model_dump(mode="json"), "default", None) == config
    assert flow_config(None, recipe, ["train.max_steps=3"]) == config


@pytest.fixture
def deployments(monkeypatch):
    """run_deployment recorded (every run Completed), and the stage tasks replaced."""
    started, tasks = [], []

    def run_deployment(name, parameters, timeout):
        started.append((name, parameters, timeout))
        return SimpleNamespace(state=SimpleNamespace(is_completed=lambda: True, name="Completed"))

    def run(name, config, /, **inputs):
        tasks.append((name, inputs))
        return {"stage": name, "path": f"/out/{name}", "key": name, "reused": False}

    monkeypatch.setattr(flows.pipeline, "run_deployment", run_deployment)
    monkeypatch.setattr(flows.pipeline, "get_run_logger", lambda: logging.getLogger("test"))
    # A stage's output is complete once its deployment ran (and never before).
    monkeypatch.setattr(flows.pipeline, "is_complete", lambda name, out: bool(started))
    monkeypatch.setattr(
        flows.pipeline, "stage_key", lambda name, config, **_: ({"in": name}, Path(f"/k/{name}"))
    )
    monkeypatch.setattr(flows.pipeline.t, "run", run)
    return started, tasks


def test_deployments_get_the_resolved_config_not_the_recipe(tmp_path, deployments):
    started, tasks = deployments
    recipe = tmp_path / "mine.yaml"
    recipe.write_text("extends: gpu\ntrain: {max_steps: 2}\n")
    config = load_config(str(recipe))
    recipe.write_text("extends: gpu\ntrain: {max_steps: 99}\n")  # edited while the run runs
    runner = flows.pipeline.PrefectStages()
    out = runner.run("evaluate", config, model="m", scenarios=Path("/t.parquet"), label="base")
    assert out == Path("/k/evaluate")
    ((name, parameters, _),) = started
    assert name == config.orchestration.evaluate_deployment
    assert set(parameters) == {"config", "model", "scenarios", "label"}
    assert Config.model_validate(parameters["config"]).train.max_steps == 2
    assert parameters["scenarios"] == "/t.parquet" and parameters["label"] == "base"
    runner.run("train", config, model="m", train_split=Path("a"), validation_split=Path("b"))
    assert started[1][0] == config.orchestration.train_deployment
    assert started[1][2] == config.orchestration.train_timeout_s
    runner.run("merge", config, model="m", adapter=Path("/k/train"))
    assert tasks == [("merge", {"model": "m", "adapter": Path("/k/train")})]
    assert [r["stage"] for r in runner.refs] == ["evaluate", "train", "merge"]


def test_an_input_changed_while_a_deployment_ran_is_named_and_its_output_found(
    monkeypatch, deployments, caplog
):
    """The worker keys a stage by its inputs' content when it starts: an input edited between
    the flow's key and the worker's moves the output; the flow follows it and says why."""
    started, _ = deployments
    keys = iter(
        [
            ({"model": "m1", "train": "t"}, Path("/k/before")),
            ({"model": "m2", "train": "t"}, Path("/k/after")),
        ]
    )
    monkeypatch.setattr(flows.pipeline, "stage_key", lambda name, config, **_: next(keys))
    monkeypatch.setattr(flows.pipeline, "is_complete", lambda name, out: out.name == "after")
    runner = flows.pipeline.PrefectStages()
    with caplog.at_level(logging.WARNING):
        out = runner.run("train", load_config("gpu"), model="m", train_split=Path("a"))
    assert out == Path("/k/after")
    assert "train: model changed while deployment" in caplog.text


def test_a_deployment_that_leaves_no_complete_output_is_an_error_at_once(monkeypatch, deployments):
    monkeypatch.setattr(flows.pipeline, "is_complete", lambda name, out: False)
    runner = flows.pipeline.PrefectStages()
    with pytest.raises(ArgenError, match="left no complete train output at /k/train"):
        runner.run("train", load_config("gpu"), model="m", train_split=Path("a"))


def test_without_deployments_every_stage_is_a_task_and_training_shows_progress(deployments):
    started, tasks = deployments
    runner = flows.pipeline.PrefectStages()
    config = load_config()
    runner.run("train", config, model="m", train_split=Path("a"), validation_split=Path("b"))
    assert started == [] and tasks[0][0] == "train"
    (callback,) = tasks[0][1]["callbacks"]
    assert type(callback).__name__ == "PrefectProgress"


def test_the_release_outcome_names_the_runs_final_state(monkeypatch):
    from argen.reporting.release import LOST, Outcome

    made = []
    monkeypatch.setattr(flows.pipeline, "create_markdown_artifact", lambda **kw: made.append(kw))
    monkeypatch.setattr(flows.pipeline, "get_run_logger", lambda: logging.getLogger("test"))
    state = flows.pipeline.final_state(Outcome(LOST, "worse on dharma", Path("/r")))
    assert (state.name, state.message, state.is_completed()) == (LOST, "worse on dharma", True)
    assert made[0]["key"] == "argen-release" and "worse on dharma" in made[0]["markdown"]
    assert "`/r/reading-sheet.md`" in made[0]["markdown"]
    flows.pipeline.publish_challenge("line", Outcome(LOST, "m", Path("/r")))  # no champion
    assert len(made) == 1


def test_mypy_covers_tasks_and_flows():
    import tomllib

    pyproject = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())
    assert {"argen", "tasks", "flows"} <= set(pyproject["tool"]["mypy"]["files"])


def test_the_run_form_offers_every_judge_backend_the_config_knows():
    """The UI's Run form lists the judge backends from the config's own type (it offered local
    and openai alone after the reader and reward-model backends were added)."""
    schema = parameter_schema(flows.pipeline.pipeline.fn).model_dump()
    field = schema["properties"]["judge_backend"]
    offered = {v for choice in field.get("anyOf", [field]) for v in choice.get("enum", [])}
    assert offered == set(get_args(JudgeConfig.model_fields["backend"].annotation))
