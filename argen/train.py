"""GRPO training through TRL with a LoRA adapter: the train split in, an adapter directory out.

Rewards are the judge's Ahimsa, Dharma and Helpfulness scores (`argen.rewards`), weighted by
`judge.weights`; prompts are built by `argen.prompting`, exactly as evaluation builds them.
The adapter kept is the best by validation combined score (or the last); the test split is
never read here. Checkpoints land in ``<out>.partial/``; the same config run again resumes from
the last one, and only a finished run is moved to ``<out>``.
"""

import json
import logging
import math
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
import torch
from datasets import Dataset
from peft import LoraConfig
from transformers import AutoConfig, AutoTokenizer, TrainerCallback
from transformers.trainer_utils import get_last_checkpoint
from trl import GRPOConfig, GRPOTrainer

from argen.atomic import atomic_dir
from argen.config import Config, TrainConfig
from argen.curate import write_parquet
from argen.errors import ArgenError, JudgeOutage
from argen.evaluate import read_scenarios
from argen.generation import wants_engine
from argen.hashing import file_sha256
from argen.judging import make_backend, open_cache
from argen.models import check_model_dir
from argen.prompting import chat_messages
from argen.rewards import JudgeRewards
from argen.rollouts import engine_rollouts
from argen.validation import ValidationCallback
from argen.version import code_version

log = logging.getLogger(__name__)


def batch_shape(train: TrainConfig) -> int:
    """Completions per device step; fails unless the group size divides the batch evenly."""
    completions = train.prompts_per_step * train.num_generations
    if completions % train.gradient_accumulation_steps:
        raise ArgenError(
            f"train.prompts_per_step x train.num_generations = {completions} completions per "
            f"step is not divisible by train.gradient_accumulation_steps = "
            f"{train.gradient_accumulation_steps}"
        )
    per_device = completions // train.gradient_accumulation_steps
    if per_device % train.num_generations and train.num_generations % per_device:
        raise ArgenError(
            f"train.num_generations = {train.num_generations} does not divide the per-device "
            f"batch of {per_device} completions; change prompts_per_step or "
            "gradient_accumulation_steps"
        )
    return per_device


def grpo_args(config: Config, work: Path, on_gpu: bool) -> GRPOConfig:
    """TRL's GRPOConfig from ours: one place where our knobs meet TRL's names."""
    train = config.train
    weights = config.judge.weights
    return GRPOConfig(
        output_dir=str(work),
        per_device_train_batch_size=batch_shape(train),
        gradient_accumulation_steps=train.gradient_accumulation_steps,
        num_generations=train.num_generations,
        max_steps=train.max_steps,
        num_train_epochs=train.num_train_epochs,
        learning_rate=train.learning_rate,
        warmup_steps=train.warmup_steps,
        max_grad_norm=train.max_grad_norm,
        beta=train.beta,
        epsilon=train.epsilon,
        loss_type=train.loss_type,
        scale_rewards=train.scale_rewards,
        temperature=train.temperature,
        top_p=train.top_p,
        top_k=train.top_k,
        max_completion_length=train.max_completion_length,
        reward_weights=[weights.ahimsa, weights.dharma, weights.helpfulness],
        seed=train.seed,
        gradient_checkpointing=train.gradient_checkpointing,
        logging_steps=train.logging_steps,
        save_strategy="steps",
        save_steps=train.save_steps,
        bf16=on_gpu,
        use_cpu=not on_gpu,
        model_init_kwargs={"dtype": torch.bfloat16 if on_gpu else torch.float32},
        log_completions=True,
        num_completions_to_print=0,
        use_vllm=train.use_vllm,
        vllm_mode="colocate",
        report_to=["wandb"] if train.wandb_mode != "disabled" else [],
        run_name=work.name,
        dataloader_num_workers=0,
        disable_tqdm=False,
    )


def training_dataset(frame: pd.DataFrame) -> Dataset:
    """Conversational prompts (our system prompt + the user) with the columns rewards need."""
    return Dataset.from_dict(
        {
            "prompt": [chat_messages(p) for p in frame["prompt"]],
            "tier": frame["tier"].tolist(),
            "scope": frame["scope"].tolist(),
            "id": frame["id"].tolist(),
        }
    )


class JudgeHealthCallback(TrainerCallback):
    """Stops training after the first step if every judgement failed: no point going on."""

    def __init__(self, rewards: JudgeRewards):
        self.rewards = rewards

    def on_step_end(self, args, state, control, **kwargs):
        if self.rewards.judged and self.rewards.failures == self.rewards.judged:
            raise JudgeOutage(
                f"the judge failed on all {self.rewards.judged} completions of the first step; "
                "check the judge configuration"
            )


class DivergenceGuard(TrainerCallback):
    """Stops training at the first step whose gradient norm is not finite: the optimizer has
    just written NaNs into the adapter, and every later step would train garbage."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        norm = (logs or {}).get("grad_norm")
        if norm is not None and not math.isfinite(norm):
            raise ArgenError(
                f"training diverged at step {state.global_step} (gradient norm {norm}); "
                "lower train.learning_rate. Checkpoints before it are kept for inspection."
            )


def finish_tracking(train: TrainConfig) -> None:
    """Close this training's wandb run: its files are complete, and the next training in the
    same process (a Prefect worker runs many) starts a run of its own. With tracking disabled
    wandb is never imported."""
    if train.wandb_mode == "disabled":
        return
    import wandb

    if wandb.run is not None:
        wandb.finish()
    wandb.teardown()  # wandb reads WANDB_DIR once per setup: the next run must set up again


def configure_wandb(train: TrainConfig, work: Path) -> None:
    """wandb offline under the run's directory unless the user chose online (or disabled)."""
    os.environ.setdefault("WANDB_PROJECT", train.wandb_project)
    os.environ["WANDB_MODE"] = train.wandb_mode
    os.environ["WANDB_DIR"] = str(work)
    os.environ.setdefault("WANDB_SILENT", "true")


def train(
    config: Config,
    model_dir: Path,
    train_split: Path,
    validation_split: Path,
    out_dir: Path,
    callbacks: Sequence[TrainerCallback] = (),
) -> Path:
    """Train a LoRA adapter with GRPO; returns `out_dir` holding the selected adapter."""
    check_model_dir(model_dir)
    train_frame = read_scenarios(train_split)
    validation_frame = read_scenarios(validation_split)
    if (train_frame["split"] == "test").any() or (validation_frame["split"] == "test").any():
        raise ArgenError("training and model selection must not see the test split")
    backend = make_backend(config.judge)
    rewards = JudgeRewards(backend, config.judge.weights.model_dump(), open_cache(config))
    on_gpu = torch.cuda.is_available()
    work = out_dir.with_name(out_dir.name + ".partial")
    work.mkdir(parents=True, exist_ok=True)
    args = grpo_args(config, work, on_gpu)
    configure_wandb(config.train, work)

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    validator = ValidationCallback(config, backend, validation_frame, tokenizer, work / "best")
    fast = not config.train.use_vllm and wants_engine(
        config.generation.engine, AutoConfig.from_pretrained(model_dir), on_gpu
    )
    rollouts = "vllm" if config.train.use_vllm else "fast" if fast else "transformers"
    log.info("GRPO rollouts: %s", rollouts)
    lora = config.train.lora
    trainer = GRPOTrainer(
        model=str(model_dir),
        reward_funcs=rewards.functions(),
        args=args,
        train_dataset=training_dataset(train_frame),
        processing_class=tokenizer,
        peft_config=LoraConfig(
            r=lora.r,
            lora_alpha=lora.alpha,
            lora_dropout=lora.dropout,
            target_modules=lora.target_modules,
            task_type="CAUSAL_LM",
        ),
        callbacks=[JudgeHealthCallback(rewards), DivergenceGuard(), validator, *callbacks],
        rollout_func=engine_rollouts(tokenizer) if fast else None,
    )
    validator.trainer = trainer
    resume = get_last_checkpoint(str(work))
    if resume:
        log.info("resuming from %s", resume)
    try:
        trainer.train(resume_from_checkpoint=resume)
        validator.validate(trainer.model, trainer.state.global_step)  # always score the last one
    finally:
        finish_tracking(config.train)

    with atomic_dir(out_dir) as tmp:
        selected = validator.best_dir if config.train.select == "best" else None
        if selected and (selected / "adapter_config.json").is_file():
            shutil.copytree(selected, tmp, dirs_exist_ok=True)
        else:
            trainer.model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        write_parquet(pd.DataFrame(trainer.state.log_history), tmp / "training_log.parquet")
        write_parquet(validator.history_frame(), tmp / "validation_log.parquet")
        _copy_tracking(work, tmp)
        manifest = {
            "stage": "train",
            "code_version": code_version(),
            "base_model": str(model_dir),
            "inputs": {
                str(train_split): file_sha256(train_split),
                str(validation_split): file_sha256(validation_split),
            },
            "config": {
                "train": config.train.model_dump(mode="json"),
                "judge": backend.name,
                "weights": config.judge.weights.model_dump(),
            },
            "selected": {"rule": config.train.select, **validator.selected(config.train.select)},
            "steps": trainer.state.global_step,
            "rollouts": rollouts,
            "resumed_from": resume,
            "judge": {"judged": rewards.judged, "failures": rewards.failures},
        }
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    shutil.rmtree(work, ignore_errors=True)
    log.info("trained %d steps; adapter in %s", trainer.state.global_step, out_dir)
    return out_dir


def _copy_tracking(work: Path, dest: Path) -> None:
    """Keep wandb's run files and TRL's completion tables with the adapter."""
    for name in ("wandb", "completions"):
        if (work / name).is_dir():
            shutil.copytree(work / name, dest / name, symlinks=True, dirs_exist_ok=True)
