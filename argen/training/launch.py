"""Training over several processes of one machine: the launching side, and what each rank's
entry (`argen.training.rank`, which trains through `argen.training.train`) shares with it.

`launch` runs in the process that holds the output's work folder (``<out>.partial``, see
`argen.training.train.train`). It writes what the ranks need into that folder and starts
``accelerate launch`` with one process per GPU, each running ``python -m argen.training.rank
SPEC``; TRL's GRPOTrainer is data-parallel under it. While the ranks train, rank 0's progress is
relayed to the caller's callbacks and the ranks' output to this process's log; a rank's failure
comes back as the same error class (`ArgenError`, `JudgeOutage`) or a RuntimeError with the output's
tail. A launcher that dies takes its ranks with it: each rank watches the launcher and its own
parent and stops when either is gone, and the next launch in the folder waits for leftover ranks (a
shared lock every rank holds) before starting its own.
"""

import collections
import fcntl
import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import yaml
from transformers import TrainerCallback, TrainerControl, TrainerState

import argen
from argen.atomic import _start_time
from argen.config import Config
from argen.errors import ArgenError, JudgeOutage
from argen.outputs import Adapter

log = logging.getLogger(__name__)

SPEC, ACCELERATE, PROGRESS, RANKS_LOCK = (
    ".launch.json",
    ".accelerate.yaml",
    ".progress.json",
    ".ranks.lock",
)
ERRORS = {"ArgenError": ArgenError, "JudgeOutage": JudgeOutage}
"""Errors a rank hands back by name, raised again in the launching process."""


def accelerate_config(processes: int) -> dict:
    """accelerate's launch settings, complete, so that no user-wide accelerate config applies.
    ``MULTI_GPU`` means "one process each" to accelerate's launcher (torchrun); on a machine
    without CUDA the ranks still train on the CPU (gloo), as `grpo_args` sets ``use_cpu``."""
    return {
        "compute_environment": "LOCAL_MACHINE",
        "distributed_type": "MULTI_GPU",
        "num_machines": 1,
        "machine_rank": 0,
        "num_processes": processes,
        "gpu_ids": "all",
        "mixed_precision": "no",  # GRPOConfig's bf16 decides, as in one process
        "use_cpu": False,
        "main_process_port": 0,  # a free port: two launches on one machine do not collide
        "rdzv_backend": "static",
        "same_network": True,
    }


def launch_command(work: Path) -> list[str]:
    """The command that starts the ranks; `work` holds their spec and accelerate's config."""
    return [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--config_file",
        str(work / ACCELERATE),
        "-m",
        "argen.training.rank",
        str(work / SPEC),
    ]


def launch_env() -> dict[str, str]:
    """This process's environment for the ranks: argen importable, output unbuffered (and no
    progress bars to garble it), NVLink multicast (NVLS) off unless the caller chose otherwise
    (LoRA's all-reduces are small, and multicast fails on hosts not set up for it)."""
    env = dict(os.environ)
    root = str(Path(argen.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    env["TQDM_DISABLE"] = "1"  # progress reaches the caller through its callbacks instead
    env.setdefault("NCCL_NVLS_ENABLE", "0")
    return env


def launch(
    config: Config,
    model_dir: Path,
    splits: Sequence[Path],
    out_dir: Path,
    callbacks: Sequence[TrainerCallback],
    processes: int,
) -> None:
    """Train with `processes` ranks into `out_dir` (rank 0 writes it); returns when all are done.
    The caller holds ``<out>.partial``; `callbacks` see on_train_begin and on_step_end with the
    step count and the number of steps (the trainer itself lives in the ranks)."""
    work = out_dir.with_name(out_dir.name + ".partial")
    _wait_for_leftover_ranks(work)
    for stale in [work / PROGRESS, *work.glob(".rank-error-*.json")]:
        stale.unlink(missing_ok=True)
    spec = {
        "config": config.model_dump(mode="json"),
        "model": str(model_dir),
        "splits": [str(p) for p in splits],
        "out": str(out_dir),
        "launcher": f"{os.getpid()}:{_start_time(os.getpid())}",
    }
    (work / SPEC).write_text(json.dumps(spec, indent=2))
    (work / ACCELERATE).write_text(yaml.safe_dump(accelerate_config(processes)))
    log.info("training with %d processes (accelerate launch)", processes)
    process = subprocess.Popen(
        launch_command(work),
        env=launch_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
    )
    tail: collections.deque[str] = collections.deque(maxlen=40)
    reader = threading.Thread(target=_relay_output, args=(process, tail), daemon=True)
    reader.start()
    try:
        code = _follow(process, work, callbacks)
    finally:
        _stop(process)
    reader.join(10)
    if code != 0:
        _raise_rank_error(work, code, tail)
    if not Adapter(out_dir).is_complete():
        raise RuntimeError(f"the training ranks finished but wrote no {Adapter(out_dir).sidecar}")


def _relay_output(process: subprocess.Popen, tail: collections.deque) -> None:
    """The ranks' output into this process's log: their own log records (``rank N ...``) at
    INFO, other output (warnings, TRL's tables) at DEBUG; the last lines are kept for an error."""
    assert process.stdout is not None  # started with stdout=PIPE
    for line in process.stdout:
        line = line.rstrip()
        if line:
            tail.append(line)
            log.log(logging.INFO if line.startswith("rank ") else logging.DEBUG, "%s", line)


def _follow(process: subprocess.Popen, work: Path, callbacks: Sequence[TrainerCallback]) -> int:
    """Wait for the ranks, passing rank 0's progress on to `callbacks` as it changes."""
    state, control, seen = TrainerState(), TrainerControl(), None
    while True:
        code = process.poll()
        try:
            progress = json.loads((work / PROGRESS).read_text())
        except (OSError, ValueError):
            progress = None
        if progress and progress != seen:
            state.global_step, state.max_steps = progress["global_step"], progress["max_steps"]
            for callback in callbacks:
                event = callback.on_train_begin if seen is None else callback.on_step_end
                # no TrainingArguments here (the trainer lives in the ranks): as the launch
                # docstring says, callbacks get only the step counts
                event(None, state, control)  # type: ignore[arg-type]
            seen = progress
        if code is not None:
            return code
        time.sleep(0.5)


def _stop(process: subprocess.Popen) -> None:
    """End the launch if it still runs (this process is being interrupted): accelerate's
    launcher passes SIGTERM on to the ranks; one that ignores it is killed a minute later."""
    if process.poll() is not None:
        return
    log.warning("stopping the training ranks")
    process.terminate()
    try:
        process.wait(60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _raise_rank_error(work: Path, code: int, tail: Sequence[str]) -> None:
    """Raise what the ranks failed with: a user's error as itself, anything else as a
    RuntimeError naming the rank and ending with the ranks' last output."""
    reports = []
    for path in sorted(work.glob(".rank-error-*.json")):
        try:
            reports.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    ours = [r for r in reports if r["type"] in ERRORS]
    if ours:
        raise ERRORS[ours[0]["type"]](ours[0]["message"])
    what = (
        f"rank {reports[0]['rank']}: {reports[0]['type']}: {reports[0]['message']}"
        if reports
        else (f"exit status {code}")
    )
    output = "\n".join(tail)
    raise RuntimeError(f"distributed training failed ({what}); last output of the ranks:\n{output}")


def _ranks_lock(work: Path, shared: bool, wait: bool = True) -> int | None:
    """A lock on the work folder's ranks lock file: every rank holds it shared for its life, a
    launcher takes it exclusive to see that no rank of an earlier launch still runs."""
    fd = os.open(work / RANKS_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
    try:
        fcntl.flock(fd, mode if wait else mode | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _wait_for_leftover_ranks(work: Path) -> None:
    """Return once no rank of an earlier launch in `work` runs (they stop on their own within
    seconds of their launcher's death)."""
    work.mkdir(parents=True, exist_ok=True)
    fd = _ranks_lock(work, shared=False, wait=False)
    if fd is None:
        log.warning("ranks of an earlier launch in %s still run; waiting for them to stop", work)
        fd = _ranks_lock(work, shared=False)
        assert fd is not None  # a waiting lock returns only once it holds the lock
    os.close(fd)


def _watch_launcher(launcher: str) -> None:
    """Stop this rank as soon as the launching process or this rank's parent (accelerate's
    launcher) is gone: nobody would wait for its results, and it holds the work folder."""
    pid, start = launcher.split(":")
    parent = os.getppid()

    def watch() -> None:
        while _start_time(int(pid)) == start and os.getppid() == parent:
            time.sleep(0.5)
        log.error("the process that launched this rank is gone; stopping")
        os._exit(3)

    threading.Thread(target=watch, name="argen-launcher-watch", daemon=True).start()


class ProgressFile(TrainerCallback):
    """Rank 0's step count, written where the launcher reads it (replaced whole each time)."""

    def __init__(self, work: Path):
        self.path = work / PROGRESS

    def _write(self, state) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps({"global_step": state.global_step, "max_steps": state.max_steps}))
        os.replace(tmp, self.path)

    def on_train_begin(self, args, state, control, **kwargs):
        self._write(state)

    def on_step_end(self, args, state, control, **kwargs):
        self._write(state)
