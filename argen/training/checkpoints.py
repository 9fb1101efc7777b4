"""Training checkpoints: which one transformers finished writing, so that a stopped run resumes
from it (and never from one whose writing was cut short)."""

import json
import logging
import re
import shutil
from pathlib import Path

from safetensors import SafetensorError, safe_open

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
