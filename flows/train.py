"""Training and merge as their own flow: the deployment a GPU work pool runs."""

from prefect import flow, get_run_logger

from argen.config import load_config
from tasks import stages as t
from tasks.progress import PrefectProgress


@flow(
    name="argen-train",
    description="GRPO + LoRA training on the train split, then the "
    "adapter merge; writes into the shared artifacts root and returns the merged model path.",
)
def train_flow(
    recipe: str = "default",
    overrides: list[str] | None = None,
    model: str | None = None,
    curated: str = "",
) -> str:
    """Train and merge.

    Args:
        recipe: bundled recipe name or path to a YAML recipe.
        overrides: ``section.field=value`` config overrides.
        model: base model spec or directory (default: the recipe's model.base).
        curated: directory holding ``train.parquet`` and ``validation.parquet``.
    """
    config = load_config(recipe, overrides or [])
    base = model or config.model.base
    adapter = t.train(config, base, curated, callbacks=(PrefectProgress(),))
    merged = t.merge(config, base, adapter["path"])
    get_run_logger().info("trained %s and merged into %s", adapter["path"], merged["path"])
    return merged["path"]
