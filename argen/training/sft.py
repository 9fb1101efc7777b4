"""The supervised warm start: a LoRA adapter trained with TRL's SFTTrainer on demonstrations.

GRPO only reinforces what the policy already samples; a base model that never declines an
off-domain ask or escalates an emergency gives no reward anything to pay for. The warm start
teaches those behaviours from hand-written answers to train-split prompts and to written prompts
beyond the scenario set (`argen.data.demonstrations`; one related to a validation prompt is
refused), with the same system prompt and chat format evaluation uses; GRPO
then continues the same adapter (`argen.training.train`), so the aligned model stays one LoRA
adapter on the base. The validation split is scored before and after with the training judge
(the same record GRPO's validation keeps) and the loss is logged per step. Checkpoints land in
``<out>.partial/``; the same config run again resumes from the newest complete one.
"""

import logging
import math
from collections import Counter
from pathlib import Path
from typing import Any, cast

import pandas as pd
import torch
from datasets import Dataset
from peft import LoraConfig
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import SFTConfig, SFTTrainer

from argen.config import Config
from argen.data.demonstrations import (
    check_written_prompts,
    closest_evaluation_prompts,
    pair_with_train,
    read_demonstrations,
)
from argen.errors import ArgenError
from argen.generation.prompting import chat_messages, system_prompt
from argen.hashing import file_sha256, json_sha256
from argen.models import check_model_dir
from argen.training.adapter_stage import (
    schedule_args,
    train_adapter,
    validated_fit,
    write_adapter,
)
from argen.training.divergence import Diverged, NonFiniteGuard
from argen.training.train import read_splits

log = logging.getLogger(__name__)


def sft_dataset(paired: pd.DataFrame, system: str) -> Dataset:
    """Conversational prompt-completion pairs: TRL trains on the answer's tokens only. Each row
    keeps its demonstration's id (which the trainer's inputs leave out) to name it later."""
    return Dataset.from_dict(
        {
            "prompt": [chat_messages(p, system) for p in paired["prompt"]],
            "completion": [[{"role": "assistant", "content": r}] for r in paired["response"]],
            "demonstration": list(paired["id"]),
        }
    )


def sft_args(config: Config, work: Path, on_gpu: bool) -> SFTConfig:
    """TRL's SFTConfig from ours: one place where our knobs meet TRL's names."""
    sft = config.sft
    return SFTConfig(
        num_train_epochs=sft.epochs,
        learning_rate=sft.learning_rate,
        per_device_train_batch_size=sft.batch_size // sft.gradient_accumulation_steps or 1,
        gradient_accumulation_steps=sft.gradient_accumulation_steps,
        max_length=sft.max_length,
        completion_only_loss=True,
        **schedule_args(config, work, on_gpu, sft.save_steps),
        gradient_checkpointing=False,
    )


def warm_start(
    config: Config, model_dir: Path, train_split: Path, validation_split: Path, out_dir: Path
) -> Path:
    """Train the warm-start adapter into `out_dir` (atomically; resumable in ``<out>.partial``)."""
    check_model_dir(model_dir)
    train_frame, validation_frame = read_splits(train_split, validation_split)
    demonstrations = read_demonstrations(config.sft.demonstrations)
    closest = closest_evaluation_prompts(demonstrations, validation_frame)
    check_written_prompts(closest, config.curate.related_threshold)
    paired, left_out = pair_with_train(train_frame, demonstrations)
    written = int(paired["written"].sum())
    log.info(
        "warm start on %d demonstrations (%d of %d train prompts, %d written prompts; %d answers "
        "for prompts outside this train split left out)",
        len(paired),
        len(paired) - written,
        len(train_frame),
        written,
        left_out,
    )

    def train(work: Path, out: Path) -> None:
        trainer, validator, resumed, skipped = _fit(
            config, model_dir, paired, validation_frame, work
        )
        inputs = {str(p): file_sha256(p) for p in (train_split, validation_split)}
        manifest = {
            "stage": "sft",
            "base_model": str(model_dir),
            "inputs": inputs,
            "demonstrations": {
                "sources": [str(p) for p in config.sft.demonstrations],
                "used": len(paired),
                "written": written,
                "left_out": left_out,
                "ids_sha256": json_sha256(sorted(paired["id"])),
            },
            "resumed_from": str(resumed) if resumed else None,
            "skipped": skipped,
            "config": {
                "sft": config.sft.model_dump(mode="json"),
                "lora": config.train.lora.model_dump(mode="json"),
                "judge": validator.backend.name,
            },
        }
        first, last = write_adapter(trainer, validator, manifest, out)
        log.info(
            "warm start: %d steps; validation combined %.4f -> %.4f; adapter in %s",
            trainer.state.global_step,
            first["combined"],
            last["combined"],
            out,
        )

    return train_adapter(out_dir, train)


def _fit(config: Config, model_dir: Path, paired, validation_frame, work: Path):
    """Build the SFT trainer in `work`; score validation, train (resuming), score again."""
    on_gpu = torch.cuda.is_available()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    # float32 weights under bfloat16 autocast on a GPU: the warm start in bfloat16 weights
    # went non-finite at the same step for the 0.5B and the 1.5B (benchmarks/RESULTS.md)
    cpu_bf16 = not on_gpu and config.sft.cpu_weights == "bfloat16"
    model = AutoModelForCausalLM.from_pretrained(
        model_dir, dtype=torch.bfloat16 if cpu_bf16 else torch.float32
    )
    guard = NonFiniteGuard(config.train.skipped_share)  # skips a non-finite step, stops on many
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
        callbacks=[guard],
    )
    try:
        validator, resume = validated_fit(trainer, config, validation_frame, work, "the warm start")
    except Diverged as exc:
        named = suspect_demonstrations(demonstrations_by_step(trainer), exc.skipped_steps)
        raise ArgenError(f"{exc} {describe_suspects(named)}") from exc
    suspects = []
    if guard.skipped_steps:
        suspects = suspect_demonstrations(demonstrations_by_step(trainer), guard.skipped_steps)
        log.warning(
            "the warm start skipped %d steps whose gradient was not finite (%s). %s",
            len(guard.skipped_steps),
            ", ".join(map(str, guard.skipped_steps)),
            describe_suspects(suspects),
        )
    return trainer, validator, resume, {"steps": guard.skipped_steps, "suspects": suspects}


def demonstrations_by_step(trainer: SFTTrainer) -> list[list[str]]:
    """The demonstrations each optimizer step of `trainer` reads, in order: its sampler (seeded
    by ``data_seed``) replayed epoch by epoch, no forward pass. Rows TRL dropped (no answer token
    left after truncation) are not in the prepared dataset, so its own ids are used."""
    ids = cast(Dataset, trainer.train_dataset)["demonstration"]  # sft_dataset's, prepared
    loader: Any = trainer.get_train_dataloader()  # accelerate's: set_epoch, batch_sampler
    accumulate = trainer.args.gradient_accumulation_steps
    steps: list[list[str]] = []
    for epoch in range(math.ceil(trainer.args.num_train_epochs)):
        loader.set_epoch(epoch)
        batches = [list(batch) for batch in loader.batch_sampler]
        for first in range(0, len(batches), accumulate):
            steps.append([ids[i] for batch in batches[first : first + accumulate] for i in batch])
    return steps[: trainer.state.max_steps]


def suspect_demonstrations(by_step: list[list[str]], skipped: list[int]) -> list[str]:
    """The demonstrations read in more than one skipped step, the most often first (all of a
    lone skipped step's): one that makes the gradient overflow does so wherever it is read, so it
    is in most batches that went non-finite, while its neighbours change from batch to batch."""
    counts = Counter(name for step in skipped for name in set(by_step[step - 1]))
    ranked = sorted(counts, key=lambda name: (-counts[name], name))
    return [name for name in ranked if counts[name] > 1] or ranked


def describe_suspects(names: list[str]) -> str:
    """One sentence naming the demonstrations to look at first ("" for none)."""
    if not names:
        return ""
    shown = ", ".join(names[:12]) + (" ..." if len(names) > 12 else "")
    return f"Demonstrations to look at first (read in the skipped steps): {shown}."
