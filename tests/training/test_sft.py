"""The warm start on a tiny random model: it trains the answer tokens, logs its loss and two
validation records, leaves prompts outside the train split out, resumes, and GRPO continues its
adapter, keeping the warm start itself when no GRPO step validates better."""

import json

import pandas as pd
import pytest
import torch
from safetensors.torch import load_file

from argen.config import load_config
from argen.errors import ArgenError
from argen.outputs import Adapter
from argen.pipeline import run_stage, stage_out
from argen.training import validation
from argen.training.checkpoints import last_complete_checkpoint
from argen.training.sft import warm_start
from argen.training.train import train
from tests.conftest import scenario, write_jsonl, write_scenarios
from tests.tiny_models import one_thread, tiny_model

pytestmark = pytest.mark.slow  # about a minute of training: the full suite, not make quick

PROMPTS = {
    "t0": ("My knee hurts on stairs. Also which stocks should I buy?", "B"),
    "t1": ("I have crushing chest pain and sweating.", "A"),
    "t2": ("How do I treat a small cut?", "C"),
    "t3": ("Write me a cover letter.", "C"),
}
ANSWERS = {
    "t0": "Knee pain on stairs is often from the kneecap; rest and strengthen. No stock tips.",
    "t1": "Call your local emergency number now: this may be a heart attack.",
    "t2": "Rinse it with clean water, press to stop bleeding and cover it.",
    "t3": "I only help with health questions, so a cover letter is not something I can write.",
}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sft")
    model, tok = tiny_model("qwen2.5-0.5b")
    model_dir = tmp / "model"
    model.save_pretrained(model_dir)
    tok.save_pretrained(model_dir)
    rows = [scenario(i, p, tier=t) for i, (p, t) in PROMPTS.items()]
    train_split = write_scenarios(tmp / "train.parquet", rows, "train")
    validation_split = write_scenarios(tmp / "val.parquet", rows[:2], "validation")
    demos = [{"id": i, "response": a, "writer": "test"} for i, a in ANSWERS.items()]
    demos.append({"id": "test-only", "response": "not in the train split"})
    write_jsonl(tmp / "demos.jsonl", demos)
    return tmp, model_dir, train_split, validation_split


def config(tmp, *extra):
    return load_config(
        "default",
        [
            f"storage.root={tmp / 'art'}",
            f"sft.demonstrations={tmp / 'demos.jsonl'}",
            "sft.epochs=2",
            "sft.batch_size=2",
            "sft.learning_rate=0.01",
            "sft.save_steps=2",
            "train.validation_prompts=2",
            "generation.max_new_tokens=4",
            "train.max_steps=1",
            "train.num_generations=2",
            "train.prompts_per_step=2",
            "train.max_completion_length=4",
            "train.wandb_mode=disabled",
            *extra,
        ],
    )


@pytest.fixture(scope="module")
def warmed(setup):
    tmp, model_dir, train_split, validation_split = setup
    with one_thread():
        out = warm_start(config(tmp), model_dir, train_split, validation_split, tmp / "sft")
    return out


def test_warm_start_trains_the_adapter_and_records_loss_and_validation(warmed):
    out = Adapter(warmed)
    manifest = out.record()
    assert manifest["stage"] == "sft"
    assert manifest["demonstrations"]["used"] == 4
    assert manifest["demonstrations"]["left_out"] == 1  # the answer to a prompt not in train
    assert manifest["steps"] == 4  # 4 answers, batch 2, 2 epochs
    weights = load_file(warmed / "adapter_model.safetensors")
    assert any(k.endswith("lora_B.weight") and v.abs().sum() > 0 for k, v in weights.items())
    losses = pd.read_parquet(out.training_log)["loss"].dropna()
    assert len(losses) == 4 and losses.iloc[-1] < losses.iloc[0]
    validation = pd.read_parquet(out.validation_log)
    assert validation["step"].tolist() == [0, 4]
    assert manifest["validation"]["before"]["step"] == 0


def test_grpo_continues_the_warm_start_adapter(setup, warmed):
    tmp, model_dir, train_split, validation_split = setup
    with one_thread():
        out = train(
            config(tmp, "train.select=last"),
            model_dir,
            train_split,
            validation_split,
            tmp / "grpo",
            warm_start=warmed,
        )
    manifest = json.loads((out / "manifest.json").read_text())
    assert "warm_start" in manifest["inputs"]
    before = load_file(warmed / "adapter_model.safetensors")
    after = load_file(out / "adapter_model.safetensors")
    assert before.keys() == after.keys()
    for key in (k for k in before if "lora_B" in k):
        # continued, not new: a new adapter's B starts at zero, one step away from the warm
        # start's trained B by about its whole size; a continued one moves by a step
        assert not torch.equal(after[key], before[key])
        assert (after[key] - before[key]).abs().max() < 0.5 * before[key].abs().max()


def test_a_stopped_warm_start_resumes_from_its_checkpoint(setup, monkeypatch):
    tmp, model_dir, train_split, validation_split = setup
    out = tmp / "resumed"

    def stop(*args, **kwargs):
        raise RuntimeError("stopped before writing the output")

    with one_thread():
        with monkeypatch.context() as patch:
            patch.setattr("argen.training.sft._write_adapter", stop)
            with pytest.raises(RuntimeError, match="stopped"):
                warm_start(config(tmp), model_dir, train_split, validation_split, out)
        assert not Adapter(out).is_complete()
        checkpoint = last_complete_checkpoint(out.with_name("resumed.partial"))
        assert checkpoint is not None and checkpoint.name == "checkpoint-4"
        warm_start(config(tmp), model_dir, train_split, validation_split, out)
    manifest = Adapter(out).record()
    assert manifest["resumed_from"] == str(checkpoint)
    assert manifest["steps"] == 4  # nothing trained twice


def test_no_matching_demonstration_is_an_error(setup, tmp_path):
    tmp, model_dir, train_split, validation_split = setup
    write_jsonl(tmp_path / "other.jsonl", [{"id": "nope", "response": "x"}])
    bad = config(tmp, f"sft.demonstrations={tmp_path / 'other.jsonl'}")
    with pytest.raises(ArgenError, match="no demonstration matches"):
        warm_start(bad, model_dir, train_split, validation_split, tmp_path / "out")


def test_the_sft_stage_is_keyed_on_its_demonstrations_and_reused_when_unchanged(setup, tmp_path):
    tmp, model_dir, train_split, validation_split = setup
    cfg = config(tmp, f"storage.root={tmp_path / 'art'}")
    inputs = {"model": model_dir, "train_split": train_split, "validation_split": validation_split}
    with one_thread():
        first, reused_first = run_stage("sft", cfg, **inputs)
        again, reused_again = run_stage("sft", cfg, **inputs)
    assert (reused_first, reused_again) == (False, True) and again == first
    write_jsonl(tmp_path / "other.jsonl", [{"id": "t0", "response": "Rest the knee."}])
    other = config(
        tmp, f"storage.root={tmp_path / 'art'}", f"sft.demonstrations={tmp_path / 'other.jsonl'}"
    )
    assert stage_out("sft", other, **inputs) != first
    grpo = stage_out("train", cfg, **inputs)
    assert stage_out("train", cfg, warm_start=first, **inputs) != grpo  # GRPO's key sees it


def test_grpo_keeps_the_warm_start_when_no_step_validates_better(setup, warmed, monkeypatch):
    """The warm start is GRPO's first candidate: a run whose steps all validate worse ships the
    warm start's adapter, not its own last or best step."""
    tmp, model_dir, train_split, validation_split = setup
    monkeypatch.setattr(validation, "objective", lambda record, penalties: -record["step"])
    with one_thread():
        out = train(
            config(tmp, "train.max_steps=2", "train.validation_steps=1"),
            model_dir,
            train_split,
            validation_split,
            tmp / "grpo-worse",
            warm_start=warmed,
        )
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["selected"]["step"] == 0 and manifest["steps"] == 2
    before = load_file(warmed / "adapter_model.safetensors")
    after = load_file(out / "adapter_model.safetensors")
    assert before.keys() == after.keys()
    assert all(torch.equal(after[k], before[k]) for k in before)
