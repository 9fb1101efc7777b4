"""The `argen` command: the library's stages, with `argen run` as the Prefect pipeline flow,
`argen notify-dataset` emitting the event that triggers a pipeline run, and `argen champion` /
`argen rollback` showing and rolling back a recipe's model line."""

import os
import sys
from typing import cast

from argen import cli, console


def run_with_prefect(config, recipe: str, overrides: list[str]) -> str:
    """`argen run`: the pipeline flow, in Prefect's ephemeral mode unless a server is set, with
    the command's `--set` overrides; prints how the release ended (Promoted, Gate failed, Lost
    to champion), the verdict and the report."""
    os.environ.setdefault("PREFECT_LOGGING_EXTRA_LOGGERS", "argen")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    from flows.pipeline import pipeline

    state = pipeline(recipe=recipe, overrides=list(overrides), return_state=True)
    report = cast(str, state.result())
    return console.final_lines(str(state.name), str(state.message), report)


def rollback(config, recipe: str) -> str:
    """Restore the recipe's model line's previous champion (recorded in its history)."""
    from argen.reporting import release

    event = release.rollback(config, release.line_name(recipe))
    return f"{event.line} champion is {event.model_dir} again (was {event.replaced})"


def champion(config, recipe: str) -> str:
    """Show the recipe's model line: its champion and its history of promotions and rollbacks."""
    from argen.reporting import release

    line = release.line_name(recipe)
    events = release.history(config, line)
    rows = [f"{e.at} {e.event:8} {e.model_dir}" for e in events]
    current = release.champion(config, line)
    head = f"{line} champion: {current.model_dir if current else 'none yet'}"
    return "\n".join([head, *rows])


def notify_dataset(config, recipe: str) -> str:
    """Emit ``argen.dataset.updated`` when the scenario sources changed since the last notice."""
    from prefect.events import emit_event

    from argen.data.curate import curate_key

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
    extra = {"notify-dataset": notify_dataset, "rollback": rollback, "champion": champion}
    return cli.main(argv, run=run_with_prefect, extra=extra)


if __name__ == "__main__":
    sys.exit(main())
