"""The warm start on a tiny random model: it trains the answer tokens, logs its loss and two
validation records, leaves prompts outside the train split out, refuses a written prompt related
to a validation prompt, resumes, and GRPO continues its adapter, keeping the warm start itself
when no GRPO step validates better."""

import json

import pandas as pd
import pytest
import torch
from safetensors.torch import load_file

from argen.errors import ArgenError
from argen.outputs import Adapter
from argen.pipeline import run_stage, stage_out
from argen.training import validation
from argen.training.checkpoints import last_complete_checkpoint
from argen.training.sft import demonstrations_by_step, suspect_demonstrations, warm_start
from argen.training.train import train
from tests.conftest import scenario, write_jsonl, write_scenarios
from tests.tiny_models import one_thread
from tests.training.conftest import ANSWERS, PROMPTS, config, grpo_continuing

pytestmark = pytest.mark.slow  # about a minute of training: the full suite, not make quick


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
    out = grpo_continuing(setup, warmed, "grpo")
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
            patch.setattr("argen.training.sft.write_adapter", stop)
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


def test_a_written_prompt_related_to_a_validation_prompt_is_refused(setup, tmp_path):
    tmp, model_dir, train_split, validation_split = setup
    asked = pd.read_parquet(validation_split)["prompt"].iloc[0]
    written = {"id": "wp-1", "prompt": f"{asked}?", "response": "Rest it.", "tier": "C"}
    written |= {"scope": "S0", "category": "clinical"}
    write_jsonl(tmp_path / "written.jsonl", [written])
    both = f"sft.demonstrations=[{tmp / 'demos.jsonl'}, {tmp_path / 'written.jsonl'}]"
    with pytest.raises(ArgenError, match="1 written prompt.*related to an evaluation prompt"):
        warm_start(config(tmp, both), model_dir, train_split, validation_split, tmp_path / "o")
    assert not (tmp_path / "o").exists()  # refused before anything was trained


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


def test_bfloat16_weights_on_a_cpu_train_a_float32_adapter(setup, tmp_path, monkeypatch):
    """`sft.cpu_weights: bfloat16` (faster on a CPU): the base loads in bfloat16, the loss stays
    finite and falls, and the adapter GRPO continues is float32 like one trained on float32."""
    from transformers import AutoModelForCausalLM

    tmp, model_dir, train_split, validation_split = setup
    loaded, load = [], AutoModelForCausalLM.from_pretrained

    def spy(*args, **kwargs):
        model = load(*args, **kwargs)
        loaded.append(model.dtype)
        return model

    monkeypatch.setattr("argen.training.sft.AutoModelForCausalLM.from_pretrained", spy)
    cfg = config(tmp, "sft.cpu_weights=bfloat16")
    with one_thread():
        out = warm_start(cfg, model_dir, train_split, validation_split, tmp_path / "bf16")
    assert loaded == [torch.bfloat16]
    weights = load_file(out / "adapter_model.safetensors")
    assert {v.dtype for v in weights.values()} == {torch.float32}
    assert any(k.endswith("lora_B.weight") and v.abs().sum() > 0 for k, v in weights.items())
    losses = pd.read_parquet(Adapter(out).training_log)["loss"].dropna()
    assert losses.notna().all() and losses.iloc[-1] < losses.iloc[0]


class PoisonedSFT:
    """An SFTTrainer (made by `make`) whose gradient turns NaN at every step that reads one of
    `culprits`, found by decoding the batch the trainer really trained on; it keeps which
    demonstrations each step read."""

    def __init__(self, culprits: set[str]):
        self.culprits, self.read, self.trainers = culprits, [], []

    def make(self, *args, **kwargs):
        from trl import SFTTrainer

        outer = self

        class Poisoned(SFTTrainer):
            def training_step(self, model, inputs, num_items_in_batch=None):
                loss = super().training_step(model, inputs, num_items_in_batch)
                texts = self.processing_class.batch_decode(inputs["input_ids"])
                read = sorted(i for i, answer in ANSWERS.items() if any(answer in t for t in texts))
                outer.read.append(read)
                if outer.culprits & set(read):
                    for param in model.parameters():
                        if param.grad is not None:
                            param.grad.fill_(float("nan"))
                return loss

        trainer = Poisoned(*args, **kwargs)
        self.trainers.append(trainer)
        return trainer


def test_skipped_steps_name_the_demonstrations_they_read(setup, tmp_path, monkeypatch):
    """The demonstration that makes the gradient overflow is named: the warm start replays its
    data order (no forward pass) and the steps it replays are the ones the trainer read."""
    tmp, model_dir, train_split, validation_split = setup
    poisoned = PoisonedSFT({"t1"})
    monkeypatch.setattr("argen.training.sft.SFTTrainer", poisoned.make)
    with one_thread():
        out = warm_start(config(tmp), model_dir, train_split, validation_split, tmp_path / "o")
    (trainer,) = poisoned.trainers
    replayed = demonstrations_by_step(trainer)
    assert [sorted(step) for step in replayed] == poisoned.read  # 4 steps of 2, as trained
    skipped = Adapter(out).record()["skipped"]
    assert skipped["steps"] == [n for n, read in enumerate(poisoned.read, 1) if "t1" in read]
    assert len(skipped["steps"]) == 2  # once in each epoch
    assert "t1" in skipped["suspects"] and len(skipped["suspects"]) <= 2


def test_a_row_trl_drops_does_not_shift_the_names(setup, tmp_path, monkeypatch):
    """TRL drops a row whose answer truncation leaves no token of: the replay names rows by the
    prepared dataset's own ids, so the rows after a dropped one keep their names."""
    tmp, model_dir, _, validation_split = setup
    rows = [scenario("t9", "My knee hurts on stairs and " * 80, tier="C")]  # first: shifts all
    rows += [scenario(i, p, tier=t) for i, (p, t) in PROMPTS.items()]
    train_split = write_scenarios(tmp_path / "train.parquet", rows, "train")
    demos = [{"id": "t9", "response": "Rest it."}] + [
        {"id": i, "response": a} for i, a in ANSWERS.items()
    ]
    write_jsonl(tmp_path / "demos.jsonl", demos)
    cfg = config(tmp, f"sft.demonstrations={tmp_path / 'demos.jsonl'}", "sft.max_length=300")
    poisoned = PoisonedSFT({"t1"})
    monkeypatch.setattr("argen.training.sft.SFTTrainer", poisoned.make)
    with one_thread():
        warm_start(cfg, model_dir, train_split, validation_split, tmp_path / "o")
    (trainer,) = poisoned.trainers
    assert len(trainer.train_dataset) == 4  # t9's prompt alone fills max_length
    assert [sorted(step) for step in demonstrations_by_step(trainer)] == poisoned.read


def test_a_diverged_warm_start_names_the_demonstrations(setup, tmp_path, monkeypatch):
    tmp, model_dir, train_split, validation_split = setup
    monkeypatch.setattr("argen.training.sft.SFTTrainer", PoisonedSFT(set(ANSWERS)).make)
    with one_thread(), pytest.raises(ArgenError, match="diverged at step 3.*look at first.*t"):
        warm_start(config(tmp), model_dir, train_split, validation_split, tmp_path / "o")


def test_suspects_are_the_demonstrations_read_in_more_than_one_skipped_step():
    by_step = [["a", "b"], ["c", "d"], ["a", "c"], ["b", "e"], ["a", "d"]]
    assert suspect_demonstrations(by_step, [1, 3, 5]) == ["a"]  # in all three
    assert suspect_demonstrations(by_step, [2, 3, 5]) == ["a", "c", "d"]  # twice each, by name
    assert suspect_demonstrations(by_step, [2]) == ["c", "d"]  # a lone step: all it read
    assert suspect_demonstrations(by_step, []) == []
