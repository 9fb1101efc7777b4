"""Training checkpoints: which one transformers finished writing, so that a stopped run resumes
from it (and never from one whose writing was cut short), and whether it was the last step."""

import json
import logging
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from peft import set_peft_model_state_dict
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file
from transformers import Trainer, TrainerState

from argen.outputs import Adapter

log = logging.getLogger(__name__)

CHECKPOINT = re.compile(r"checkpoint-(\d+)")
CHECKPOINT_FILES = ("adapter_config.json", "adapter_model.safetensors", "optimizer.pt")


def checkpoint_state(folder: Path) -> dict | None:
    """The trainer state of a checkpoint transformers finished writing, else None.

    transformers writes trainer_state.json last (after weights, optimizer, scheduler and RNG
    state), so a parsable one for the folder's own step means the rest was written."""
    try:
        state = json.loads((folder / "trainer_state.json").read_text())
        with safe_open(folder / "adapter_model.safetensors", "pt"):
            pass
    except (OSError, ValueError, SafetensorError):
        return None
    named = CHECKPOINT.fullmatch(folder.name)
    if named is None or state.get("global_step") != int(named.group(1)):
        return None
    files = [folder / name for name in CHECKPOINT_FILES] + [folder / "scheduler.pt"]
    files += list(folder.glob("rng_state*.pth"))[:1] or [folder / "rng_state.pth"]
    return state if all(f.is_file() and f.stat().st_size for f in files) else None


def last_complete_checkpoint(work: Path) -> Path | None:
    """The newest complete checkpoint in `work`. Newer ones whose writing was cut short are
    removed with a warning; the resumed run writes them again."""
    found = [p for p in work.glob("checkpoint-*") if CHECKPOINT.fullmatch(p.name) and p.is_dir()]
    for folder in sorted(found, key=lambda p: int(p.name.split("-")[1]), reverse=True):
        if checkpoint_state(folder) is not None:
            return folder
        log.warning("skipping %s: its writing did not finish (stopped while saving)", folder)
        shutil.rmtree(folder, ignore_errors=True)
    return None


def finished(checkpoint: Path) -> bool:
    """Whether `checkpoint` holds the run's last step. transformers resumed from it would train
    one step more (it compares the step count with max_steps only after a step)."""
    state = checkpoint_state(checkpoint) or {}
    return 0 < state.get("max_steps", 0) <= state.get("global_step", 0)


def restore(trainer: Trainer, checkpoint: Path) -> None:
    """Put `trainer` where it stood at `checkpoint` (its state and its adapter), training
    nothing: what resuming from a finished run's last checkpoint means."""
    log.info("%s is the run's last step: nothing left to train", checkpoint)
    trainer.state = TrainerState.load_from_json(str(checkpoint / "trainer_state.json"))
    set_peft_model_state_dict(trainer.model, load_file(checkpoint / "adapter_model.safetensors"))


def train_from(trainer: Trainer, checkpoint: Path | None) -> None:
    """Train, resuming from `checkpoint` (None: from the start); a finished run's last
    checkpoint is restored, not trained past."""
    if checkpoint is not None and finished(checkpoint):
        restore(trainer, checkpoint)
    else:
        trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)


def spent_work_dir(work: Path) -> bool:
    """A ``.partial`` folder nothing will resume: its output is finished, or it holds no
    complete checkpoint."""
    out = work.with_name(work.name.removesuffix(".partial"))
    return Adapter(out).is_complete() or last_complete_checkpoint(work) is None


@contextmanager
def removed_when_spent(work: Path) -> Iterator[None]:
    """Remove the ``.partial`` work folder on the way out, whatever happened, when nothing will
    resume from it (a finished run, a run that failed before its first checkpoint, a run that
    waited and used another's adapter): no empty ``.partial`` is left behind."""
    try:
        yield
    finally:
        if work.is_dir() and spent_work_dir(work):
            shutil.rmtree(work, ignore_errors=True)
