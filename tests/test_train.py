"""Two real GRPO steps on CPU with the packaged model and the local judge."""

import json

import pandas as pd
import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, TrainerCallback, TrainerState

from argen.config import load_config
from argen.errors import ArgenError
from argen.merge import merge
from argen.train import DivergenceGuard, batch_shape, train
from tests.conftest import DEAD_JUDGE, scenario, write_scenarios

pytestmark = pytest.mark.slow

PROMPTS = [
    "My knee hurts. Which stocks should I buy?",
    "What is a fever?",
    "I have crushing chest pain.",
    "How do I treat a small cut?",
]


def split_file(path, split, n=4):
    rows = [scenario(f"{split}{i}", PROMPTS[i % 4], tier="B") for i in range(n)]
    return write_scenarios(path, rows, split)


def tiny(tmp_path, *extra):
    return load_config(
        "default",
        [
            f"storage.root={tmp_path / 'art'}",
            "train.max_steps=2",
            "train.num_generations=2",
            "train.prompts_per_step=2",
            "train.max_completion_length=8",
            "train.save_steps=1",
            "train.validation_steps=1",
            "train.validation_prompts=2",
            "generation.max_new_tokens=8",
            *extra,
        ],
    )


@pytest.fixture(scope="module")
def trained(default_model_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("train")
    config = tiny(tmp)
    out = train(
        config,
        default_model_dir,
        split_file(tmp / "train.parquet", "train"),
        split_file(tmp / "val.parquet", "validation"),
        tmp / "adapter",
    )
    return config, out


def test_adapter_changes_and_base_does_not(trained, default_model_dir):
    _, out = trained
    weights = load_file(out / "adapter_model.safetensors")
    lora_b = [v for k, v in weights.items() if "lora_B" in k]
    assert lora_b and any(v.abs().sum() > 0 for v in lora_b)  # B starts at zero
    before = load_file(default_model_dir / "model.safetensors")
    base = AutoModelForCausalLM.from_pretrained(default_model_dir)
    for name, tensor in base.state_dict().items():
        if name in before:
            assert torch.equal(tensor, before[name])


def test_tracking_outputs(trained):
    _, out = trained
    log = pd.read_parquet(out / "training_log.parquet")
    assert "rewards/dharma/mean" in log.columns and "validation/combined" in log.columns
    assert list(out.glob("wandb/offline-run-*")), "wandb offline run files"
    validation = pd.read_parquet(out / "validation_log.parquet")
    assert validation["step"].tolist() == [0, 1, 2]  # the untrained policy first
    assert validation["deflects_clinical"].between(0, 1).all()  # clinical S0 prompts
    assert validation["refers_tier_c"].isna().all()  # no tier C prompt: no rate, not zero
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["steps"] == 2 and manifest["selected"]["rule"] == "best"
    assert manifest["selected"]["step"] in (1, 2)  # step 0 is a reference, never chosen
    assert not out.with_name("adapter.partial").exists()


def test_merge_matches_adapter_and_loads_without_peft(trained, default_model_dir, tmp_path):
    _, adapter = trained
    merged = merge(default_model_dir, adapter, tmp_path / "merged")
    manifest = json.loads((merged / "merge_manifest.json").read_text())
    assert manifest["max_logit_difference"] < 1e-3
    model = AutoModelForCausalLM.from_pretrained(merged)
    assert not any("lora" in name for name, _ in model.named_parameters())
    assert (merged / "chat_template.jinja").is_file() or "chat_template" in (
        merged / "tokenizer_config.json"
    ).read_text()


class Crash(TrainerCallback):
    """Dies as the second step begins, after checkpoint-1 was written."""

    def on_step_begin(self, args, state, control, **kwargs):
        if state.global_step == 1:
            raise KeyboardInterrupt("simulated crash")


class Recorder(TrainerCallback):
    def __init__(self):
        self.first_step = None

    def on_step_begin(self, args, state, control, **kwargs):
        if self.first_step is None:
            self.first_step = state.global_step


def test_interrupted_run_resumes_from_checkpoint(default_model_dir, tmp_path):
    config = tiny(tmp_path)
    splits = (
        split_file(tmp_path / "t.parquet", "train"),
        split_file(tmp_path / "v.parquet", "validation"),
    )
    out = tmp_path / "adapter"
    with pytest.raises(KeyboardInterrupt):
        train(config, default_model_dir, *splits, out, callbacks=[Crash()])
    assert not out.exists()
    assert (tmp_path / "adapter.partial" / "checkpoint-1").is_dir()
    recorder = Recorder()
    train(config, default_model_dir, *splits, out, callbacks=[recorder])
    assert recorder.first_step == 1  # continued after the checkpoint, not from 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["resumed_from"].endswith("checkpoint-1") and manifest["steps"] == 2
    validations = pd.read_parquet(out / "validation_log.parquet")
    assert validations["step"].tolist() == [0, 1, 2]  # the interrupted run's scoring is kept


def test_bad_inputs(default_model_dir, tmp_path):
    config = tiny(tmp_path)
    good = split_file(tmp_path / "t.parquet", "train")
    with pytest.raises(ArgenError, match="is not a directory"):
        train(config, tmp_path / "missing", good, good, tmp_path / "o")
    empty = tmp_path / "empty.parquet"
    pd.read_parquet(good).iloc[:0].to_parquet(empty)
    with pytest.raises(ArgenError, match="has no rows"):
        train(config, default_model_dir, empty, good, tmp_path / "o")
    test_split = split_file(tmp_path / "test.parquet", "test")
    with pytest.raises(ArgenError, match="must not see the test split"):
        train(config, default_model_dir, good, test_split, tmp_path / "o")
    with pytest.raises(ArgenError, match="not divisible by train.gradient_accumulation_steps"):
        batch_shape(
            tiny(
                tmp_path,
                "train.num_generations=3",
                "train.prompts_per_step=1",
                "train.gradient_accumulation_steps=2",
            ).train
        )
    with pytest.raises(ArgenError, match="has no adapter_config.json"):
        merge(default_model_dir, tmp_path, tmp_path / "m")
    assert not (tmp_path / "o").exists() and not (tmp_path / "m").exists()


def test_judge_failing_everything_stops_early(default_model_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("DEAD_KEY", "k")
    config = tiny(tmp_path, *DEAD_JUDGE)
    split = split_file(tmp_path / "t.parquet", "train")
    with pytest.raises(ArgenError, match="judge failed on all"):
        train(
            config,
            default_model_dir,
            split,
            split_file(tmp_path / "v.parquet", "validation"),
            tmp_path / "o",
        )
    assert not (tmp_path / "o").exists()


def test_divergence_guard_stops_at_a_non_finite_gradient_norm():
    state = TrainerState(global_step=7)
    DivergenceGuard().on_log(None, state, None, logs={"grad_norm": 0.5, "loss": 1.0})
    with pytest.raises(ArgenError, match="diverged at step 7"):
        DivergenceGuard().on_log(None, state, None, logs={"grad_norm": float("nan")})
