"""Data parallelism changes nothing but speed: on the same completions, the training stage in
two CPU processes logs the same first step (loss, gradient norm, reward) as in one process.

Sampling differs between one and two processes (each rank draws from its own seed), so both
runs take their completions from `tests.deterministic_rollouts`, which depend on the prompts
alone; the ranks get it through a ``sitecustomize`` on their ``PYTHONPATH``."""

import json
import math
import os

import pandas as pd
import pytest

import argen.training.train
from argen.config import load_config
from argen.training.train import train
from tests import deterministic_rollouts
from tests.training.test_train import split_file, tiny_model_dir  # noqa: F401  (shared fixture)

pytestmark = pytest.mark.slow

SITECUSTOMIZE = "import tests.deterministic_rollouts as d\nd.install()\n"


def first_step(out) -> dict:
    """Step 1's training log entry (the one with the gradient norm) of the output `out`."""
    frame = pd.read_parquet(out / "training_log.parquet")
    row = frame[(frame["step"] == 1) & frame["grad_norm"].notna()].iloc[0]
    return {key: float(row[key]) for key in ("loss", "grad_norm", "reward", "num_tokens")}


def test_two_ranks_log_the_first_step_of_one_process(
    tiny_model_dir,  # noqa: F811
    tmp_path,
    monkeypatch,
):
    splits = (
        split_file(tmp_path / "t.parquet", "train", n=8),
        split_file(tmp_path / "v.parquet", "validation"),
    )
    common = [
        "train.max_steps=1",
        "train.num_generations=4",
        "train.prompts_per_step=2",  # 8 completions: all in one process, or 4 on each rank
        "train.max_completion_length=8",
        "train.warmup_steps=0",
        "train.lora.dropout=0",
        "train.validation_steps=100",
        "train.validation_prompts=1",
        "train.wandb_mode=disabled",
        "generation.max_new_tokens=4",
        "generation.engine=fast",  # rollouts through rollout_func, replaced below
    ]
    steps = {}
    for processes in (1, 2):
        overrides = [
            f"storage.root={tmp_path / f'art{processes}'}",
            f"train.num_processes={processes}",
            *common,
        ]
        out = tmp_path / f"adapter{processes}"
        if processes == 1:
            monkeypatch.setattr(
                argen.training.train, "engine_rollouts", deterministic_rollouts.rollouts
            )
        else:
            site = tmp_path / "site"
            site.mkdir()
            (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
            paths = [str(site), os.environ.get("PYTHONPATH", "")]
            monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in paths if p))
        train(load_config("default", overrides), tiny_model_dir, *splits, out)
        assert json.loads((out / "manifest.json").read_text())["rollouts"] == "fast"
        steps[processes] = first_step(out)
    one, two = steps[1], steps[2]
    assert math.isfinite(two["grad_norm"]) and two["grad_norm"] > 0
    assert two["num_tokens"] == one["num_tokens"]  # the same prompts and completions
    assert two["reward"] == pytest.approx(one["reward"], abs=1e-6)
    assert two["loss"] == pytest.approx(one["loss"], rel=1e-3, abs=1e-6)
    assert two["grad_norm"] == pytest.approx(one["grad_norm"], rel=1e-3)
