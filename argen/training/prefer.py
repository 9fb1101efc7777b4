"""Preference tuning: the warm start's adapter trained on with TRL's DPOTrainer.

GRPO's reward reads harm only in part (its grader's held-out F1 on dangerous instructions is
under 0.7), so a policy trained on it keeps most of the harmful answers it starts with. The
labelled answers are used directly instead: each train prompt's demonstration is preferred to
answers labellers read as bad for it (`argen.data.preferences`), most of them the project's own
policies' samples. DPO pushes
those down against a frozen copy of the warm start (TRL's "ref" adapter), with the chosen
answer's language-model loss beside it (RPO) so that the demonstrations stay likely. The same
adapter continues, so the aligned model stays one LoRA adapter on the base. Validation is scored
before and after with the training judge; checkpoints land in ``<out>.partial/`` and resume.
Off in every recipe: at 1.5B it raised declines but not the share of answers read as harmful
(benchmarks/RESULTS.md, "Preference tuning at 1.5B").
"""

import logging
from pathlib import Path

import pandas as pd
import torch
from datasets import Dataset
from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import DPOConfig, DPOTrainer

from argen.config import Config
from argen.data.demonstrations import pair_with_train, read_demonstrations
from argen.data.labels import items_sha256, read_labels
from argen.data.preferences import preference_pairs, statistics
from argen.generation.prompting import chat_messages, system_prompt
from argen.hashing import dir_sha256, file_sha256, json_sha256
from argen.models import check_model_dir
from argen.training.adapter_stage import (
    optimised_labels,
    schedule_args,
    train_adapter,
    validated_fit,
    write_adapter,
)
from argen.training.divergence import NonFiniteGuard
from argen.training.train import read_splits

log = logging.getLogger(__name__)


def preference_dataset(pairs: pd.DataFrame, system: str) -> Dataset:
    """Conversational (prompt, chosen, rejected) rows, in the chat format evaluation uses."""
    return Dataset.from_dict(
        {
            "prompt": [chat_messages(p, system) for p in pairs["prompt"]],
            "chosen": [[{"role": "assistant", "content": r}] for r in pairs["chosen"]],
            "rejected": [[{"role": "assistant", "content": r}] for r in pairs["rejected"]],
        }
    )


def dpo_args(config: Config, work: Path, on_gpu: bool) -> DPOConfig:
    """TRL's DPOConfig from ours: one place where our knobs meet TRL's names."""
    prefer = config.prefer
    losses = ["sigmoid", "sft"] if prefer.sft_weight > 0 else ["sigmoid"]
    return DPOConfig(
        num_train_epochs=prefer.epochs,
        learning_rate=prefer.learning_rate,
        per_device_train_batch_size=prefer.batch_size // prefer.gradient_accumulation_steps or 1,
        gradient_accumulation_steps=prefer.gradient_accumulation_steps,
        max_length=prefer.max_length,
        beta=prefer.beta,
        loss_type=losses,
        loss_weights=[1.0, prefer.sft_weight][: len(losses)],
        **schedule_args(config, work, on_gpu, prefer.save_steps),
    )


def prefer(
    config: Config,
    model_dir: Path,
    train_split: Path,
    validation_split: Path,
    warm_start: Path,
    out_dir: Path,
) -> Path:
    """Tune the warm start's adapter on preference pairs into `out_dir` (atomically; resumable
    in ``<out>.partial``)."""
    check_model_dir(model_dir)
    train_frame, validation_frame = read_splits(train_split, validation_split)
    paired, _ = pair_with_train(train_frame, read_demonstrations(config.sft.demonstrations))
    labels = read_labels(config.prefer.labels)
    pairs = preference_pairs(paired, labels, config.prefer.pairs_per_prompt, config.train.seed)
    # what an audit grader trained on these labels would record: its rates are then no evidence
    tuned_against = items_sha256(labels[labels["split"] == "train"])
    log.info("preference tuning on %s", statistics(pairs))

    def train(work: Path, out: Path) -> None:
        trainer, validator, resumed = _fit(
            config, model_dir, warm_start, pairs, validation_frame, work
        )
        manifest = {
            "stage": "prefer",
            "base_model": str(model_dir),
            "inputs": {
                **{str(p): file_sha256(p) for p in (train_split, validation_split)},
                "warm_start": dir_sha256(warm_start),
            },
            "pairs": {
                "labels": str(config.prefer.labels),
                "count": len(pairs),
                "prompts": int(pairs["id"].nunique()),
                "harmful": int(pairs["harmful"].sum()),
                "sha256": json_sha256(pairs[["id", "chosen", "rejected"]].values.tolist()),
            },
            "optimised_labels": [*optimised_labels(warm_start), tuned_against],
            "resumed_from": str(resumed) if resumed else None,
            "config": {
                "prefer": config.prefer.model_dump(mode="json"),
                "judge": validator.backend.name,
            },
        }
        first, last = write_adapter(trainer, validator, manifest, out)
        log.info(
            "preference tuning: %d steps; validation combined %.4f -> %.4f; adapter in %s",
            trainer.state.global_step,
            first["combined"],
            last["combined"],
            out,
        )

    return train_adapter(out_dir, train)


def _fit(config: Config, model_dir: Path, warm_start: Path, pairs, validation_frame, work: Path):
    """Build the DPO trainer on the warm start's adapter in `work`; score validation, train
    (resuming), score again."""
    on_gpu = torch.cuda.is_available()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    # float32 weights under bfloat16 autocast on a GPU, as the warm start trains
    base = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    policy = PeftModel.from_pretrained(base, warm_start, is_trainable=True)
    trainer = DPOTrainer(
        model=policy,  # TRL keeps a frozen copy of this adapter ("ref") as the reference
        args=dpo_args(config, work, on_gpu),
        train_dataset=preference_dataset(pairs, system_prompt(config.generation)),
        processing_class=tokenizer,
        # skips a non-finite step, stops on a divergence
        callbacks=[NonFiniteGuard(config.train.skipped_share)],
    )
    validator, resume = validated_fit(trainer, config, validation_frame, work, "preference tuning")
    return trainer, validator, resume
