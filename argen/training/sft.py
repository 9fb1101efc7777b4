"""The supervised warm start: a LoRA adapter trained with TRL's SFTTrainer on demonstrations.

GRPO only reinforces what the policy already samples; a base model that never declines an
off-domain ask or escalates an emergency gives no reward anything to pay for. The warm start
teaches those behaviours from hand-written answers to train-split prompts
(`argen.data.demonstrations`), with the same system prompt and chat format evaluation uses; GRPO
then continues the same adapter (`argen.training.train`), so the aligned model stays one LoRA
adapter on the base. The validation split is scored before and after with the training judge
(the same record GRPO's validation keeps) and the loss is logged per step. Checkpoints land in
``<out>.partial/``; the same config run again resumes from the newest complete one.
"""

import json
import logging
from pathlib import Path

import pandas as pd
import torch
from datasets import Dataset
from peft import LoraConfig
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import SFTConfig, SFTTrainer

from argen.atomic import atomic_dir, identity, output_path, owned_dir, sweep_work_dirs
from argen.config import Config
from argen.data.curate import write_parquet
from argen.data.demonstrations import pair_with_train, read_demonstrations
from argen.errors import machine_faults
from argen.generation.prompting import chat_messages, system_prompt
from argen.hashing import file_sha256, json_sha256
from argen.judging.scoring import make_backend
from argen.models import check_model_dir
from argen.outputs import Adapter
from argen.training import steplog
from argen.training.checkpoints import (
    last_complete_checkpoint,
    removed_when_spent,
    spent_work_dir,
)
from argen.training.divergence import NonFiniteGuard
from argen.training.train import read_splits
from argen.training.validation import ValidationCallback
from argen.version import code_version

log = logging.getLogger(__name__)


def sft_dataset(paired: pd.DataFrame, system: str) -> Dataset:
    """Conversational prompt-completion pairs: TRL trains on the answer's tokens only."""
    return Dataset.from_dict(
        {
            "prompt": [chat_messages(p, system) for p in paired["prompt"]],
            "completion": [[{"role": "assistant", "content": r}] for r in paired["response"]],
        }
    )


def sft_args(config: Config, work: Path, on_gpu: bool) -> SFTConfig:
    """TRL's SFTConfig from ours: one place where our knobs meet TRL's names."""
    sft = config.sft
    return SFTConfig(
        output_dir=str(work),
        num_train_epochs=sft.epochs,
        learning_rate=sft.learning_rate,
        per_device_train_batch_size=sft.batch_size // sft.gradient_accumulation_steps or 1,
        gradient_accumulation_steps=sft.gradient_accumulation_steps,
        max_length=sft.max_length,
        completion_only_loss=True,
        lr_scheduler_type="cosine",
        warmup_steps=0.05,
        logging_steps=1,
        save_strategy="steps",
        save_steps=sft.save_steps,
        bf16=on_gpu,
        use_cpu=not on_gpu,
        gradient_checkpointing=False,
        report_to=[],
        seed=config.train.seed,
        data_seed=config.train.seed,
        dataloader_num_workers=0,
        disable_tqdm=False,
    )


def warm_start(
    config: Config, model_dir: Path, train_split: Path, validation_split: Path, out_dir: Path
) -> Path:
    """Train the warm-start adapter into `out_dir` (atomically; resumable in ``<out>.partial``)."""
    check_model_dir(model_dir)
    train_frame, validation_frame = read_splits(train_split, validation_split)
    demonstrations = read_demonstrations(config.sft.demonstrations)
    paired, left_out = pair_with_train(train_frame, demonstrations)
    log.info(
        "warm start on %d demonstrations (%d of %d train prompts; %d answers for prompts outside "
        "this train split left out)",
        len(paired),
        len(paired),
        len(train_frame),
        left_out,
    )
    out_dir = output_path(out_dir)
    work = out_dir.with_name(out_dir.name + ".partial")
    before = identity(out_dir)
    sweep_work_dirs(out_dir.parent, ".partial", lambda f: f != work and spent_work_dir(f))
    with machine_faults(out_dir), owned_dir(work), removed_when_spent(work):
        if identity(out_dir) != before and Adapter(out_dir).is_complete():
            log.info("another run finished %s while this one waited; using it", out_dir)
            return out_dir
        trainer, validator, resumed = _fit(config, model_dir, paired, validation_frame, work)
        inputs = {str(p): file_sha256(p) for p in (train_split, validation_split)}
        record = {
            "inputs": inputs,
            "demonstrations": {
                "source": str(config.sft.demonstrations),
                "used": len(paired),
                "left_out": left_out,
                "ids_sha256": json_sha256(sorted(paired["id"])),
            },
            "resumed_from": str(resumed) if resumed else None,
        }
        _write_adapter(trainer, validator, config, model_dir, record, out_dir)
    return out_dir


def _fit(config: Config, model_dir: Path, paired, validation_frame, work: Path):
    """Build the SFT trainer in `work`; score validation, train (resuming), score again."""
    on_gpu = torch.cuda.is_available()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    # float32 weights under bfloat16 autocast on a GPU: the warm start in bfloat16 weights
    # went non-finite at the same step for the 0.5B and the 1.5B (benchmarks/RESULTS.md)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    lora = config.train.lora
    trainer = SFTTrainer(
        model=model,
        args=sft_args(config, work, on_gpu),
        train_dataset=sft_dataset(paired, system_prompt(config.generation)),
        processing_class=tokenizer,
        peft_config=LoraConfig(
            r=lora.r,
            lora_alpha=lora.alpha,
            lora_dropout=lora.dropout,
            target_modules=lora.target_modules,
            task_type="CAUSAL_LM",
        ),
        callbacks=[NonFiniteGuard()],  # skips a non-finite step, stops on a divergence
    )
    steplog.use_step_lines(trainer)
    validator = ValidationCallback(
        config, make_backend(config.judge), validation_frame, tokenizer, work / "best"
    )
    validator.validate(trainer.model, 0)
    resume = last_complete_checkpoint(work)
    if resume:
        log.info("resuming the warm start from %s", resume)
    trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    validator.validate(trainer.model, trainer.state.global_step)
    return trainer, validator, resume


def _write_adapter(trainer, validator, config: Config, model_dir, record: dict, out_dir: Path):
    """The adapter, tokenizer, loss and validation logs and the manifest, atomically."""
    with atomic_dir(out_dir) as tmp:
        trainer.model.save_pretrained(str(tmp))
        trainer.processing_class.save_pretrained(tmp)
        written = Adapter(tmp)
        write_parquet(pd.DataFrame(trainer.state.log_history), written.training_log)
        write_parquet(validator.history_frame(), written.validation_log)
        first, last = validator.history[0], validator.history[-1]
        manifest = {
            "stage": "sft",
            "code_version": code_version(),
            "base_model": str(model_dir),
            **record,
            "config": {
                "sft": config.sft.model_dump(mode="json"),
                "lora": config.train.lora.model_dump(mode="json"),
                "judge": validator.backend.name,
            },
            "steps": trainer.state.global_step,
            "validation": {"before": first, "after": last},
        }
        written.sidecar.write_text(json.dumps(manifest, indent=2) + "\n")
    log.info(
        "warm start: %d steps; validation combined %.4f -> %.4f; adapter in %s",
        trainer.state.global_step,
        first["combined"],
        last["combined"],
        out_dir,
    )
