"""Training and merge as their own flow: the deployment a GPU work pool runs."""

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
def train_flow(config: dict[str, Any], model: str, train_split: str, validation_split: str) -> str:
    """Train and merge.

    Args:
        config: the resolved configuration (the pipeline's, as JSON).
        model: base model spec or directory.
        train_split: the curated train split (parquet).
        validation_split: the curated validation split (parquet).
    """
    resolved = Config.model_validate(config)
    splits = {"train_split": Path(train_split), "validation_split": Path(validation_split)}
    adapter = t.run("train", resolved, model=model, callbacks=(PrefectProgress(),), **splits)
    merged = t.run("merge", resolved, model=model, adapter=Path(adapter["path"]))
    get_run_logger().info("trained %s and merged into %s", adapter["path"], merged["path"])
    return merged["path"]
