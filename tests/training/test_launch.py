"""GRPO over several processes: the training stage under accelerate with two CPU ranks (gloo) on
a tiny random model, killed after a checkpoint and resumed; and the launch's settings."""

import json
import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
import torch
from transformers import TrainerCallback

from argen.config import load_config
from argen.errors import ArgenError, JudgeOutage
from argen.training.distributed import process_count
from argen.training.launch import _raise_rank_error, _ranks_lock, accelerate_config, launch_env
from argen.training.train import batch_shape, train
from tests.training.test_train import split_file, tiny_model_dir  # noqa: F401  (shared fixture)


def test_num_processes_counts_visible_gpus_and_refuses_more(monkeypatch):
    train_config = load_config("default", ["train.num_processes=auto"]).train
    assert process_count(train_config) == (torch.cuda.device_count() or 1)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert process_count(train_config) == 2
    assert process_count(load_config("default", ["train.num_processes=2"]).train) == 2
    with pytest.raises(ArgenError, match="num_processes = 3 but this machine shows 2 CUDA"):
        process_count(load_config("default", ["train.num_processes=3"]).train)
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ArgenError, match="set train.num_processes instead"):
        process_count(train_config)


def test_prompts_per_step_is_the_global_batch():
    gpu = load_config("gpu").train  # 8 prompts x 8 generations
    assert [batch_shape(gpu, n) for n in (1, 2, 4)] == [64, 32, 16]
    with pytest.raises(ArgenError, match=r"x 3 training process\(es\)"):
        batch_shape(gpu, 3)


def test_launch_settings_are_complete_and_keep_nvlink_multicast_off(monkeypatch):
    settings = accelerate_config(2)
    assert settings["num_processes"] == 2 and settings["num_machines"] == 1
    assert settings["main_process_port"] == 0  # a free port, never a fixed one
    monkeypatch.delenv("NCCL_NVLS_ENABLE", raising=False)
    env = launch_env()
    assert env["NCCL_NVLS_ENABLE"] == "0" and env["TQDM_DISABLE"] == "1"
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert env["PYTHONPATH"].split(os.pathsep)[0] == repo
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "1")
    assert launch_env()["NCCL_NVLS_ENABLE"] == "1"  # the caller's choice stands


def test_a_rank_error_comes_back_as_its_class(tmp_path):
    def report(rank: int, kind: str, message: str):
        (tmp_path / f".rank-error-{rank}.json").write_text(
            json.dumps({"rank": rank, "type": kind, "message": message})
        )

    with pytest.raises(RuntimeError, match=r"(?s)exit status -9.*first line\nlast line"):
        _raise_rank_error(tmp_path, -9, ["first line", "last line"])
    report(1, "RuntimeError", "Connection reset by peer")
    with pytest.raises(RuntimeError, match="rank 1: RuntimeError: Connection reset"):
        _raise_rank_error(tmp_path, 1, [])
    report(0, "JudgeOutage", "the judge failed on all 4 completions")
    with pytest.raises(JudgeOutage, match="failed on all 4"):
        _raise_rank_error(tmp_path, 1, [])


LAUNCHER = """
import json, sys
from pathlib import Path
from argen.config import load_config
from argen.training.train import train

overrides, model, train_split, validation_split, out = sys.argv[1:]
train(load_config("default", json.loads(overrides)), *map(Path, sys.argv[2:6]))
"""


class FirstStep(TrainerCallback):
    """The step training (re)started from, as relayed from rank 0."""

    def __init__(self):
        self.steps = []

    def on_train_begin(self, args, state, control, **kwargs):
        self.steps.append(state.global_step)


def wait_for(condition, what: str, seconds: float = 300):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def complete_checkpoint(work, step: int) -> bool:
    """Rank 0 wrote checkpoint-`step`'s trainer state (transformers writes it last)."""
    try:
        state = json.loads((work / f"checkpoint-{step}" / "trainer_state.json").read_text())
    except (OSError, ValueError):
        return False
    return state.get("global_step") == step


@pytest.mark.slow
def test_two_cpu_ranks_write_one_output_and_resume_after_the_launcher_is_killed(
    tiny_model_dir,  # noqa: F811
    tmp_path,
):
    overrides = [
        f"storage.root={tmp_path / 'art'}",
        "train.num_processes=2",
        "train.max_steps=3",
        "train.num_generations=2",
        "train.prompts_per_step=2",  # 4 completions a step: 2 on each rank
        "train.max_completion_length=8",
        "train.save_steps=1",
        "train.validation_steps=2",
        "train.validation_prompts=2",
        "train.wandb_mode=offline",
        "generation.max_new_tokens=8",
    ]
    splits = (
        split_file(tmp_path / "t.parquet", "train"),
        split_file(tmp_path / "v.parquet", "validation"),
    )
    out, work = tmp_path / "adapter", tmp_path / "adapter.partial"
    args = [json.dumps(overrides), tiny_model_dir, *splits, out]
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER, *map(str, args)])
    try:
        ended = launcher.poll
        wait_for(lambda: complete_checkpoint(work, 1) or ended() is not None, "checkpoint-1")
        assert launcher.poll() is None, "the launcher ended before checkpoint-1"
    finally:
        launcher.send_signal(signal.SIGKILL)
        launcher.wait()
    assert not out.exists()

    def ranks_gone() -> bool:  # every rank holds the ranks lock shared while it lives
        fd = _ranks_lock(work, shared=False, wait=False)
        return fd is not None and os.close(fd) is None

    wait_for(ranks_gone, "the ranks to stop after their launcher died", seconds=60)

    first = FirstStep()
    train(load_config("default", overrides), tiny_model_dir, *splits, out, [first])
    manifest = json.loads((out / "manifest.json").read_text())
    resumed = int(manifest["resumed_from"].rsplit("checkpoint-", 1)[1])
    assert manifest["steps"] == 3 and len(first.steps) == 1
    assert 1 <= resumed <= first.steps[0]  # went on from a checkpoint, not from step 0
    assert manifest["judge"] == {"judged": 3 * 4, "failures": 0}  # both ranks, all 3 steps
    for name in ("adapter_model.safetensors", "training_log.parquet", "manifest.json"):
        assert len(list(out.rglob(name))) == 1, name
    assert pd.read_parquet(out / "validation_log.parquet")["step"].tolist() == [0, 2, 3]
    assert pd.read_parquet(out / "training_log.parquet")["step"].max() == 3
    runs = list(out.glob("wandb/offline-run-*"))
    assert 1 <= len(runs) <= 2  # rank 0's, one per launch (rank 1 never starts one)
    assert not work.exists() and sorted(p.name for p in tmp_path.glob(".*")) == []


def test_one_process_trains_on_one_gpu_even_where_several_are_visible(tmp_path):
    """Outside a distributed launch transformers would wrap the model in DataParallel over every
    visible GPU, and TRL would load it with device_map="auto", which spreads its layers over
    them all; TRL's GRPO runs neither, so the arguments ask for one device and no device map."""
    from trl import GRPOConfig

    from argen.training.distributed import one_gpu_per_process

    args = GRPOConfig(
        output_dir=str(tmp_path), use_cpu=True, report_to=[], model_init_kwargs={"dtype": "auto"}
    )
    assert args.n_gpu == 0
    assert one_gpu_per_process(args).model_init_kwargs == {"dtype": "auto"}  # one GPU: as it was
    args._n_gpu = 2  # what a two-GPU host reports to a single process
    assert one_gpu_per_process(args).n_gpu == 1
    assert args.model_init_kwargs == {"dtype": "auto", "device_map": None}
