"""GRPO training through TRL with a LoRA adapter: the train split in, an adapter directory out.

Rewards are the judge's Ahimsa, Dharma and Helpfulness scores (`argen.training.rewards`), weighted
by `judge.weights`; prompts are built by `argen.generation.prompting`, exactly as evaluation builds
them. The adapter kept is the best by validation combined score (or the last); the test split is
never read here. Checkpoints land in ``<out>.partial/``; the same config run again resumes from the
newest complete one, and only a finished run is moved to ``<out>``.
"""

import json
import logging
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import pandas as pd
import torch
from datasets import Dataset
from peft import LoraConfig, PeftModel
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedTokenizerBase,
    TrainerCallback,
)
from transformers.trainer_callback import ExportableState
from trl import GRPOConfig, GRPOTrainer

from argen.atomic import atomic_dir
from argen.config import Config, TrainConfig
from argen.data.curate import write_parquet
from argen.errors import ArgenError, JudgeOutage
from argen.evaluation.evaluate import read_scenarios
from argen.generation.generate import wants_engine
from argen.generation.prompting import chat_messages, system_prompt
from argen.hashing import dir_sha256, file_sha256
from argen.judging.scoring import make_backend, open_cache
from argen.machine import hardware
from argen.models import check_model_dir
from argen.outputs import Adapter
from argen.training import distributed, steplog
from argen.training.adapter_stage import optimised_labels, train_adapter
from argen.training.checkpoints import (
    checkpoint_state,
    last_complete_checkpoint,
    train_from,
)
from argen.training.distributed import (
    RankTotals,
    RankValidation,
    is_main,
    process_count,
    world_size,
)
from argen.training.divergence import NonFiniteGuard
from argen.training.launch import launch
from argen.training.rewards import JudgeRewards, reward_weights
from argen.training.rollouts import engine_rollouts
from argen.version import code_version

log = logging.getLogger(__name__)


def batch_shape(train: TrainConfig, processes: int = 1) -> int:
    """Completions per device step; fails unless the group size divides the batch evenly.
    prompts_per_step x num_generations is the global batch, shared by `processes` ranks."""
    completions = train.prompts_per_step * train.num_generations
    if completions % (train.gradient_accumulation_steps * processes):
        raise ArgenError(
            f"train.prompts_per_step x train.num_generations = {completions} completions per "
            f"step is not divisible by train.gradient_accumulation_steps = "
            f"{train.gradient_accumulation_steps} x {processes} training process(es)"
        )
    per_device = completions // (train.gradient_accumulation_steps * processes)
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
    args = GRPOConfig(
        output_dir=str(work),
        per_device_train_batch_size=batch_shape(train, world_size()),
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
        reward_weights=reward_weights(weights.model_dump(), train.penalties),
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
    return distributed.one_gpu_per_process(args)


def training_dataset(frame: pd.DataFrame, system: str) -> Dataset:
    """Conversational prompts (the system prompt + the user) with the columns rewards need."""
    return Dataset.from_dict(
        {
            "prompt": [chat_messages(p, system) for p in frame["prompt"]],
            "tier": frame["tier"].tolist(),
            "scope": frame["scope"].tolist(),
            "category": frame["category"].tolist(),
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


class JudgeCounts(TrainerCallback, ExportableState):
    """The whole run's reward judgements and failures. Saved in every checkpoint's trainer
    state, so a resumed run counts what it judged before the interruption too."""

    def __init__(self, rewards: JudgeRewards | RankTotals, earlier: dict | None = None):
        self.rewards = rewards
        self.earlier = earlier or {"judged": 0, "failures": 0}

    def totals(self) -> dict:
        return {
            "judged": self.earlier["judged"] + self.rewards.judged,
            "failures": self.earlier["failures"] + self.rewards.failures,
        }

    def state(self) -> dict:
        """What transformers writes into trainer_state.json at each checkpoint."""
        return {"args": {}, "attributes": {"totals": self.totals()}}


def judge_counts(checkpoint: Path | None) -> dict | None:
    """The judgement totals saved in `checkpoint` (None without one)."""
    if checkpoint is None:
        return None
    state = checkpoint_state(checkpoint)
    assert state is not None  # a checkpoint from last_complete_checkpoint
    saved = state["stateful_callbacks"].get(JudgeCounts.__name__)
    return saved["attributes"]["totals"] if saved else None


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
    warm_start: Path | None = None,
) -> Path:
    """Train a LoRA adapter with GRPO; returns `out_dir` holding the selected adapter. With
    `warm_start` (an `argen.training.sft` adapter) GRPO continues that adapter instead of a new one.

    One process at a time works in ``<out>.partial``; a second run of the same output waits,
    then uses the first one's adapter instead of training again. With ``train.num_processes``
    above 1 the ranks train under accelerate (`argen.training.launch`) and `callbacks` see their
    progress."""
    check_model_dir(model_dir)
    splits = (train_split, validation_split)
    read_splits(*splits)
    processes = process_count(config.train)
    batch_shape(config.train, processes)

    def run(work: Path, out: Path) -> None:
        if processes == 1:
            fit_and_write(config, model_dir, splits, out, callbacks, warm_start)
        elif warm_start is not None:
            raise ArgenError(
                "the warm start (sft.enabled) is not yet wired for train.num_processes > 1"
            )
        else:
            launch(config, model_dir, splits, out, callbacks, processes)

    return train_adapter(out_dir, run)


def read_splits(train_split: Path, validation_split: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Both splits, checked: training and model selection must never see the test split."""
    frames = read_scenarios(train_split), read_scenarios(validation_split)
    if any((frame["split"] == "test").any() for frame in frames):
        raise ArgenError("training and model selection must not see the test split")
    return frames


def fit_and_write(config, model_dir, splits, out_dir, callbacks=(), warm_start=None) -> None:
    """Train in ``<out>.partial`` and write the output; with several ranks, rank 0 writes."""
    work = out_dir.with_name(out_dir.name + ".partial")
    run = _fit(config, model_dir, *read_splits(*splits), work, callbacks, warm_start)
    if is_main():
        inputs = {str(p): file_sha256(p) for p in splits}
        if warm_start is not None:
            inputs["warm_start"] = dir_sha256(warm_start)
        _write_adapter(run, config, model_dir, inputs, optimised_labels(warm_start), out_dir)
        log.info("trained %d steps; adapter in %s", run.trainer.state.global_step, out_dir)


@dataclass
class TrainingRun:
    """What a finished training hands to the writing of its output."""

    trainer: GRPOTrainer
    validator: RankValidation
    tokenizer: PreTrainedTokenizerBase
    counts: "JudgeCounts"
    judge: str
    rollouts: str
    resumed_from: Path | None


def _fit(
    config: Config,
    model_dir: Path,
    train_frame: pd.DataFrame,
    validation_frame: pd.DataFrame,
    work: Path,
    callbacks: Sequence[TrainerCallback],
    warm_start: Path | None = None,
) -> TrainingRun:
    """Build the GRPO trainer in `work` and train, resuming from its newest complete checkpoint."""
    backend = make_backend(config.judge)
    weights, limit = config.judge.weights.model_dump(), config.judge.max_failure_rate
    rewards = JudgeRewards(backend, weights, open_cache(config), limit, config.train.penalties)
    on_gpu = torch.cuda.is_available()
    configure_wandb(config.train, work)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    validator = RankValidation(
        config, backend, validation_frame, tokenizer, work / "best", warm_start is not None
    )
    fast = not config.train.use_vllm and wants_engine(
        config.generation.engine, AutoConfig.from_pretrained(model_dir), on_gpu
    )
    rollouts = "vllm" if config.train.use_vllm else "fast" if fast else "transformers"
    log.info("GRPO rollouts: %s", rollouts)
    resume = last_complete_checkpoint(work)
    totals = RankTotals(rewards)  # every rank's judgements, not only this one's
    counts = JudgeCounts(totals, judge_counts(resume))
    # skips a non-finite step; across ranks, says whose gradient went bad
    guard = NonFiniteGuard(config.train.skipped_share, per_rank=world_size() > 1)
    guards = [JudgeHealthCallback(rewards), totals, counts, guard]
    policy, peft_config = _policy(config, model_dir, warm_start, on_gpu)
    args = grpo_args(config, work, on_gpu)
    if not isinstance(policy, str):
        args.model_init_kwargs = None  # the warm-started policy is loaded already
    trainer = GRPOTrainer(
        model=policy,
        # TRL's RewardFunc type leaves out the async reward functions TRL runs
        reward_funcs=rewards.functions(),  # type: ignore[arg-type]
        args=args,
        train_dataset=training_dataset(train_frame, system_prompt(config.generation)),
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=[*guards, validator, *callbacks],
        rollout_func=engine_rollouts(tokenizer) if fast else None,
    )
    validator.trainer = steplog.use_step_lines(trainer)  # a line per step, not TRL's dict
    if resume:
        log.info("resuming from %s", resume)
    try:
        train_from(trainer, resume)
        validator.validate(trainer.model, trainer.state.global_step)  # always score the last one
    finally:
        finish_tracking(config.train)
    return TrainingRun(trainer, validator, tokenizer, counts, backend.name, rollouts, resume)


def _policy(
    config: Config, model_dir: Path, warm_start: Path | None, on_gpu: bool
) -> tuple[str | PeftModel, LoraConfig | None]:
    """What GRPO trains: a new LoRA adapter on the base (TRL loads the path), or the warm
    start's adapter on it, trainable, so the aligned model stays one adapter on the base."""
    lora = config.train.lora
    if warm_start is None:
        return str(model_dir), LoraConfig(
            r=lora.r,
            lora_alpha=lora.alpha,
            lora_dropout=lora.dropout,
            target_modules=lora.target_modules,
            task_type="CAUSAL_LM",
        )
    base = AutoModelForCausalLM.from_pretrained(
        model_dir, dtype=torch.bfloat16 if on_gpu else torch.float32
    )
    log.info("GRPO continues the warm start's adapter %s", warm_start)
    return PeftModel.from_pretrained(base, warm_start, is_trainable=True), None


def _write_adapter(
    run: TrainingRun,
    config: Config,
    model_dir: Path,
    inputs: dict,
    optimised: list[str],
    out_dir: Path,
) -> None:
    """The selected adapter, tokenizer, logs and manifest (with the label sets the warm start
    was tuned against, `optimised`), atomically into `out_dir`."""
    work = Path(cast(str, run.trainer.args.output_dir))  # None only before TrainingArguments init
    with atomic_dir(out_dir) as tmp:
        selected = run.validator.best_dir if config.train.select == "best" else None
        if selected and (selected / "adapter_config.json").is_file():
            shutil.copytree(selected, tmp, dirs_exist_ok=True)
        else:
            cast(PeftModel, run.trainer.model).save_pretrained(str(tmp))  # built with peft_config
        run.tokenizer.save_pretrained(tmp)
        written = Adapter(tmp)
        write_parquet(pd.DataFrame(run.trainer.state.log_history), written.training_log)
        write_parquet(run.validator.history_frame(), written.validation_log)
        _copy_tracking(work, tmp)
        manifest = {
            "stage": "train",
            "code_version": code_version(),
            "base_model": str(model_dir),
            "inputs": inputs,
            "optimised_labels": optimised,
            "config": {
                "train": config.train.model_dump(mode="json"),
                "judge": run.judge,
                "weights": config.judge.weights.model_dump(),
            },
            "selected": {
                "rule": config.train.select,
                **run.validator.selected(config.train.select),
            },
            "steps": run.trainer.state.global_step,
            "rollouts": run.rollouts,
            "resumed_from": str(run.resumed_from) if run.resumed_from else None,
            "judge": run.counts.totals(),
            "hardware": hardware(),
        }
        written.sidecar.write_text(json.dumps(manifest, indent=2) + "\n")


def _copy_tracking(work: Path, dest: Path) -> None:
    """Keep wandb's run files and TRL's completion tables with the adapter."""
    for name in ("wandb", "completions"):
        if (work / name).is_dir():
            shutil.copytree(work / name, dest / name, symlinks=True, dirs_exist_ok=True)
