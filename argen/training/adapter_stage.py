"""What the adapter stages share: training in a resumable ``<out>.partial`` folder (all three);
for the warm start and preference tuning, their schedule, validation and the adapter written with
its logs and manifest atomically; and the label sets an adapter was tuned against.
"""

import json
import logging
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from argen.atomic import atomic_dir, identity, output_path, owned_dir, sweep_work_dirs
from argen.data.curate import write_parquet
from argen.errors import machine_faults
from argen.judging.scoring import make_backend
from argen.outputs import Adapter
from argen.training import steplog
from argen.training.checkpoints import last_complete_checkpoint, removed_when_spent, spent_work_dir
from argen.training.validation import ValidationCallback
from argen.version import code_version

log = logging.getLogger(__name__)


def schedule_args(config, work: Path, on_gpu: bool, save_steps: int) -> dict:
    """The TrainingArguments the adapter stages share: where and how often they checkpoint and
    log, the cosine schedule, the device and precision, and the seed."""
    return dict(
        output_dir=str(work),
        lr_scheduler_type="cosine",
        warmup_steps=0.05,
        logging_steps=1,
        save_strategy="steps",
        save_steps=save_steps,
        bf16=on_gpu,
        use_cpu=not on_gpu,
        report_to=[],
        seed=config.train.seed,
        data_seed=config.train.seed,
        dataloader_num_workers=0,
        disable_tqdm=False,
    )


def train_adapter(out_dir: Path, train: Callable[[Path, Path], None]) -> Path:
    """Run `train(work, out_dir)` in ``<out>.partial`` (one process at a time; an earlier run's
    checkpoints there resume). When another run finished `out_dir` while this one waited for the
    folder, its adapter is used instead."""
    out_dir = output_path(out_dir)
    work = out_dir.with_name(out_dir.name + ".partial")
    before = identity(out_dir)
    sweep_work_dirs(out_dir.parent, ".partial", lambda f: f != work and spent_work_dir(f))
    with machine_faults(out_dir), owned_dir(work), removed_when_spent(work):
        if identity(out_dir) != before and Adapter(out_dir).is_complete():
            log.info("another run finished %s while this one waited; using it", out_dir)
            return out_dir
        train(work, out_dir)
    return out_dir


def validated_fit(trainer, config, validation_frame: pd.DataFrame, work: Path, what: str):
    """Train with `trainer` in `work` (resuming from its newest complete checkpoint), the
    validation split scored with the training judge before and after; returns the validator
    and the checkpoint resumed from (None: a fresh start)."""
    steplog.use_step_lines(trainer)
    validator = ValidationCallback(
        config,
        make_backend(config.judge),
        validation_frame,
        trainer.processing_class,
        work / "best",
    )
    validator.validate(trainer.model, 0)
    resume = last_complete_checkpoint(work)
    if resume:
        log.info("resuming %s from %s", what, resume)
    trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    validator.validate(trainer.model, trainer.state.global_step)
    return validator, resume


def optimised_labels(adapter: Path | None) -> list[str]:
    """The label sets (`argen.data.labels.items_sha256`) an adapter was tuned against, through
    every stage it continues; none for a new adapter."""
    if adapter is None:
        return []
    return list(Adapter(adapter).record().get("optimised_labels", []))


def write_adapter(trainer, validator, manifest: dict, out_dir: Path) -> tuple[dict, dict]:
    """The trained ("default") adapter, tokenizer, loss and validation logs and `manifest` (with
    the steps and the validation before and after), atomically; returns that first and last
    validation record."""
    with atomic_dir(out_dir) as tmp:
        trainer.model.save_pretrained(str(tmp), selected_adapters=["default"])
        trainer.processing_class.save_pretrained(tmp)
        written = Adapter(tmp)
        write_parquet(pd.DataFrame(trainer.state.log_history), written.training_log)
        write_parquet(validator.history_frame(), written.validation_log)
        first, last = validator.history[0], validator.history[-1]
        record = {
            "code_version": code_version(),
            **manifest,
            "steps": trainer.state.global_step,
            "validation": {"before": first, "after": last},
        }
        written.sidecar.write_text(json.dumps(record, indent=2) + "\n")
    return first, last
