"""The `argen` command: the library's stages, with `argen run` as the Prefect pipeline flow and
`argen notify-dataset` emitting the event that triggers a pipeline run."""

import os
import sys

from argen import cli


def run_with_prefect(config, recipe: str) -> str:
    """`argen run`: the pipeline flow, in Prefect's ephemeral mode unless a server is set."""
    os.environ.setdefault("PREFECT_LOGGING_EXTRA_LOGGERS", "argen")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    from flows.pipeline import pipeline

    return pipeline(recipe=recipe)


def notify_dataset(config, recipe: str) -> str:
    """Emit ``argen.dataset.updated`` when the scenario sources changed since the last notice."""
    from prefect.events import emit_event

    from argen.curate import curate_key

    key = curate_key(config.curate)
    marker = config.storage.root / "last_dataset_key"
    if marker.is_file() and marker.read_text().strip() == key:
        return f"scenario sources unchanged ({key}); no event"
    emit_event(
        event="argen.dataset.updated",
        resource={"prefect.resource.id": f"argen.dataset.{key}"},
        payload={"recipe": recipe, "sources": [str(s) for s in config.curate.sources]},
    )
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(key + "\n")
    return f"emitted argen.dataset.updated for {key}"


def main(argv: list[str] | None = None) -> int:
    return cli.main(argv, run=run_with_prefect, extra={"notify-dataset": notify_dataset})


if __name__ == "__main__":
    sys.exit(main())
