"""Two real GRPO steps on CPU with the packaged model and the local judge."""

import json
import logging
import shutil
import signal
import subprocess
import sys
import threading
import time

import pandas as pd
import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    LlamaConfig,
    LlamaForCausalLM,
    TrainerCallback,
)

from argen.atomic import owned_dir, sweep_work_dirs
from argen.config import load_config
from argen.errors import ArgenError, JudgeOutage
from argen.outputs import Merged
from argen.training.checkpoints import last_complete_checkpoint, spent_work_dir
from argen.training.merge import merge
from argen.training.train import batch_shape, train
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
    config = tiny(tmp, "train.penalties={echoes_system_prompt: 0.5, refers_tier_c: 0.2}")
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
    gaming = log["rewards/gaming/mean"].dropna()  # train.penalties' reward, on training steps
    assert len(gaming) == 2 and gaming.between(-0.7, 0).all()
    steps = log.dropna(subset=["grad_norm"])  # every step, validated ones too, logs its update
    assert steps["step"].tolist() == [1, 2] and (steps["skipped_steps"] == 0).all()
    assert list(out.glob("wandb/offline-run-*")), "wandb offline run files"
    validation = pd.read_parquet(out / "validation_log.parquet")
    assert validation["step"].tolist() == [0, 1, 2]  # the untrained policy first
    assert validation["deflects_clinical"].between(0, 1).all()  # clinical S0 prompts
    assert validation["refers_tier_c"].isna().all()  # no tier C prompt: no rate, not zero
    echo_cost = 0.5 * validation["echoes_system_prompt"]
    assert (validation["objective"] == validation["combined"] - echo_cost).all()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["steps"] == 2 and manifest["selected"]["rule"] == "best"
    assert manifest["selected"]["step"] in (1, 2)  # step 0 is a reference, never chosen
    assert manifest["hardware"]["accelerator"] and manifest["hardware"]["cpus"] > 0
    assert not out.with_name("adapter.partial").exists()


def test_merge_matches_adapter_and_loads_without_peft(trained, default_model_dir, tmp_path):
    _, adapter = trained
    merged = merge(default_model_dir, adapter, tmp_path / "merged")
    manifest = Merged(merged).record()
    assert manifest["max_logit_difference"] < 1e-3
    model = AutoModelForCausalLM.from_pretrained(merged)
    assert not any("lora" in name for name, _ in model.named_parameters())
    assert (merged / "chat_template.jinja").is_file() or "chat_template" in (
        merged / "tokenizer_config.json"
    ).read_text()


def test_an_adapter_published_without_its_tokenizer_merges_with_the_bases(
    trained, default_model_dir, tmp_path
):
    _, adapter = trained
    published = tmp_path / "published"
    published.mkdir()
    for name in ("adapter_config.json", "adapter_model.safetensors"):
        shutil.copy(adapter / name, published / name)
    merged = merge(default_model_dir, published, tmp_path / "merged")
    assert Merged(merged).record()["max_logit_difference"] < 1e-3
    assert (merged / "tokenizer_config.json").is_file()


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


@pytest.fixture(scope="module")
def tiny_model_dir(default_model_dir, tmp_path_factory):
    """A 2-layer random Llama with the packaged model's tokenizer: a training step in a blink."""
    tokenizer = AutoTokenizer.from_pretrained(default_model_dir)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=512,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    out = tmp_path_factory.mktemp("tiny-llama")
    LlamaForCausalLM(config).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


KILLED_WHILE_SAVING = """
import json, sys, time
from pathlib import Path
from transformers import TrainerState
from argen.config import load_config
from argen.training.train import train

overrides, model, train_split, validation_split, out, writing = sys.argv[1:]
save = TrainerState.save_to_json

def save_slowly(self, path):
    # checkpoint-2's trainer state (written last) is half on disk when we are killed
    if self.global_step == 2:
        text = json.dumps({"global_step": 2, "log_history": self.log_history})
        with open(path, "w") as f:
            f.write(text[: len(text) // 2])
        Path(writing).write_text(path)
        time.sleep(600)
    save(self, path)

TrainerState.save_to_json = save_slowly
train(load_config("default", json.loads(overrides)), *map(Path, sys.argv[2:6]))
"""


def test_a_run_killed_while_writing_a_checkpoint_resumes_from_the_last_complete_one(
    tiny_model_dir, tmp_path, caplog
):
    overrides = [
        f"storage.root={tmp_path / 'art'}",
        "train.max_steps=3",
        "train.num_generations=2",
        "train.prompts_per_step=2",
        "train.max_completion_length=8",
        "train.save_steps=1",
        "train.validation_steps=10",
        "train.validation_prompts=2",
        "train.wandb_mode=disabled",
        "generation.max_new_tokens=8",
    ]
    splits = (
        split_file(tmp_path / "t.parquet", "train"),
        split_file(tmp_path / "v.parquet", "validation"),
    )
    out, writing = tmp_path / "adapter", tmp_path / "writing"
    args = [json.dumps(overrides), tiny_model_dir, *splits, out, writing]
    child = subprocess.Popen([sys.executable, "-c", KILLED_WHILE_SAVING, *map(str, args)])
    try:
        deadline = time.monotonic() + 600
        while not writing.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert writing.exists(), "the training never reached checkpoint-2"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    work = tmp_path / "adapter.partial"
    assert (work / "checkpoint-2" / "optimizer.pt").is_file()  # killed mid-checkpoint
    recorder = Recorder()
    with caplog.at_level(logging.WARNING, logger="argen.training.checkpoints"):
        train(load_config("default", overrides), tiny_model_dir, *splits, out, [recorder])
    assert "skipping" in caplog.text and "checkpoint-2" in caplog.text
    assert recorder.first_step == 1  # from checkpoint-1, the newest complete one
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["resumed_from"].endswith("checkpoint-1") and manifest["steps"] == 3
    assert manifest["judge"] == {"judged": 3 * 2 * 2, "failures": 0}  # every step, not the last 2
    assert not work.exists()


def fake_checkpoint(work, step: int, complete: bool = True):
    """A checkpoint folder as transformers leaves it; without `complete`, killed before its
    trainer state was written."""
    folder = work / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    save_file({"w": torch.zeros(2)}, folder / "adapter_model.safetensors")
    for name in ("adapter_config.json", "optimizer.pt", "scheduler.pt", "rng_state.pth"):
        (folder / name).write_text("x")
    if complete:
        state = {"global_step": step, "stateful_callbacks": {}}
        (folder / "trainer_state.json").write_text(json.dumps(state))
    return folder


def test_the_newest_complete_checkpoint_is_chosen_and_torn_ones_removed(tmp_path):
    work = tmp_path / "a.partial"
    fake_checkpoint(work, 9)
    complete = fake_checkpoint(work, 10)
    torn = fake_checkpoint(work, 12, complete=False)
    (fake_checkpoint(work, 11) / "trainer_state.json").write_text('{"global_step": 1')
    assert last_complete_checkpoint(work) == complete
    assert sorted(p.name for p in work.iterdir()) == ["checkpoint-10", "checkpoint-9"]
    assert not torn.exists()


def test_spent_work_folders_are_swept_and_resumable_ones_kept(tmp_path):
    finished, resumable, empty = (tmp_path / f"{n}.partial" for n in "abc")
    fake_checkpoint(finished, 1)
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "manifest.json").write_text("{}")
    fake_checkpoint(resumable, 1)
    fake_checkpoint(empty, 2, complete=False)
    for folder in (finished, resumable, empty):
        (folder / ".owner.lock").touch()  # as owned_dir leaves it
    removed = sweep_work_dirs(tmp_path, ".partial", spent_work_dir)
    assert removed == [finished, empty] and resumable.is_dir()


def test_a_second_run_of_one_output_waits_and_uses_the_first_ones(tmp_path, default_model_dir):
    config = tiny(tmp_path)
    splits = (
        split_file(tmp_path / "t.parquet", "train"),
        split_file(tmp_path / "v.parquet", "validation"),
    )
    out = tmp_path / "adapter"
    done = []
    with owned_dir(out.with_name("adapter.partial")):  # the first run, training
        second = threading.Thread(
            target=lambda: done.append(train(config, default_model_dir, *splits, out))
        )
        second.start()
        time.sleep(1)
        assert not done, "the second run did not wait"
        out.mkdir()
        (out / "manifest.json").write_text('{"by": "first"}')  # the first one finishes
    second.join(60)
    assert done == [out] and json.loads((out / "manifest.json").read_text()) == {"by": "first"}
    assert not out.with_name("adapter.partial").exists()  # the waiter leaves no empty folder


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
    with pytest.raises(JudgeOutage, match="judge failed on all"):
        train(
            config,
            default_model_dir,
            split,
            split_file(tmp_path / "v.parquet", "validation"),
            tmp_path / "o",
        )
    assert not (tmp_path / "o").exists()
    assert not (tmp_path / "o.partial").exists()  # nothing to resume from: not left behind


class CrashAfterLastCheckpoint(TrainerCallback):
    """Dies right after the last step's checkpoint is written, before the output is."""

    def on_save(self, args, state, control, **kwargs):
        if state.global_step == state.max_steps:
            raise KeyboardInterrupt("simulated crash")


def test_resuming_from_the_last_checkpoint_trains_nothing_more(tiny_model_dir, tmp_path):
    config = tiny(tmp_path, "train.validation_steps=10", "train.wandb_mode=disabled")
    splits = (  # an epoch longer than the run: transformers would go on within it
        split_file(tmp_path / "t.parquet", "train", n=8),
        split_file(tmp_path / "v.parquet", "validation"),
    )
    out = tmp_path / "adapter"
    with pytest.raises(KeyboardInterrupt):
        train(config, tiny_model_dir, *splits, out, callbacks=[CrashAfterLastCheckpoint()])
    last = tmp_path / "adapter.partial" / "checkpoint-2"
    assert last.is_dir() and not out.exists()
    saved = load_file(last / "adapter_model.safetensors")
    recorder = Recorder()
    train(config, tiny_model_dir, *splits, out, callbacks=[recorder])
    assert recorder.first_step is None  # no step trained: the run had finished
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["resumed_from"].endswith("checkpoint-2") and manifest["steps"] == 2
    assert manifest["judge"] == {"judged": 2 * 2 * 2, "failures": 0}  # 2 steps x 2 prompts x 2
    assert all(
        torch.equal(saved[k], v) for k, v in load_file(out / "adapter_model.safetensors").items()
    )
