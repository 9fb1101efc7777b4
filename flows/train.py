"""Training and merge, the warm start and preference tuning, as their own flows: the deployments
a GPU work pool runs."""

from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger

from argen.config import Config
from tasks import stages as t
from tasks.progress import PrefectProgress


@flow(
    name="argen-train",
    description="GRPO + LoRA training on the train split, then the "
    "adapter merge; writes into the shared artifacts root and returns the merged model path.",
)
def train_flow(
    config: dict[str, Any],
    model: str,
    train_split: str,
    validation_split: str,
    warm_start: str | None = None,
) -> str:
    """Train and merge.

    Args:
        config: the resolved configuration (the pipeline's, as JSON).
        model: base model spec or directory.
        train_split: the curated train split (parquet).
        validation_split: the curated validation split (parquet).
        warm_start: the warm start's adapter, which GRPO continues (None: a new adapter).
    """
    resolved = Config.model_validate(config)
    splits = {"train_split": Path(train_split), "validation_split": Path(validation_split)}
    warm = {"warm_start": Path(warm_start)} if warm_start else {}
    progress = (PrefectProgress(),)
    adapter = t.run("train", resolved, model=model, callbacks=progress, **splits, **warm)
    merged = t.run("merge", resolved, model=model, adapter=Path(adapter["path"]))
    get_run_logger().info("trained %s and merged into %s", adapter["path"], merged["path"])
    return merged["path"]


@flow(
    name="argen-sft",
    description="The supervised warm start (SFTTrainer + LoRA) on the demonstrations of the train "
    "split; writes into the shared artifacts root and returns the adapter path.",
)
def sft_flow(config: dict[str, Any], model: str, train_split: str, validation_split: str) -> str:
    """Warm start.

    Args:
        config: the resolved configuration (the pipeline's, as JSON).
        model: base model spec or directory.
        train_split: the curated train split (parquet).
        validation_split: the curated validation split (parquet).
    """
    resolved = Config.model_validate(config)
    splits = {"train_split": Path(train_split), "validation_split": Path(validation_split)}
    adapter = t.run("sft", resolved, model=model, **splits)
    get_run_logger().info("warm start adapter in %s", adapter["path"])
    return adapter["path"]


@flow(
    name="argen-prefer",
    description="Preference tuning (DPOTrainer) of the warm start's adapter on labelled answers of "
    "the train split; writes into the shared artifacts root and returns the adapter path.",
)
def prefer_flow(
    config: dict[str, Any], model: str, train_split: str, validation_split: str, warm_start: str
) -> str:
    """Preference tuning.

    Args:
        config: the resolved configuration (the pipeline's, as JSON).
        model: base model spec or directory.
        train_split: the curated train split (parquet).
        validation_split: the curated validation split (parquet).
        warm_start: the warm start's adapter, which this tunes.
    """
    resolved = Config.model_validate(config)
    splits = {"train_split": Path(train_split), "validation_split": Path(validation_split)}
    adapter = t.run("prefer", resolved, model=model, warm_start=Path(warm_start), **splits)
    get_run_logger().info("preference-tuned adapter in %s", adapter["path"])
    return adapter["path"]
