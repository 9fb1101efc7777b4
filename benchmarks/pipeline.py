"""Wall time of the whole default pipeline through Prefect, per stage, and of an identical
re-run (which should recompute nothing).

    python -m benchmarks.pipeline [--recipe default]

Each run uses a fresh artifacts root and reports directory under a temporary directory (the
judgement cache and the dequantized model cache are cold for the first run except the model,
which every machine prepares once). Per-stage times come from Prefect's task runs.
"""

import argparse
import asyncio
import os
import tempfile
import time

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_EXTRA_LOGGERS", "argen")

from prefect.client.orchestration import get_client  # noqa: E402
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterParentFlowRunId  # noqa: E402

from flows.pipeline import pipeline  # noqa: E402


async def stage_times(flow_run_id) -> list[tuple[str, str, float]]:
    """(task run name, final state, seconds) for the run and its child flows' task runs."""
    async with get_client() as client:
        children = await client.read_flow_runs(
            flow_run_filter=FlowRunFilter(
                parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[flow_run_id])
            )
        )
        ids = [flow_run_id, *(c.id for c in children)]
        rows = []
        for run_id in ids:
            runs = await client.read_task_runs(flow_run_filter=FlowRunFilter(id={"any_": [run_id]}))
            for task in runs:
                if task.start_time and task.end_time:
                    seconds = (task.end_time - task.start_time).total_seconds()
                else:
                    seconds = 0.0
                rows.append((task.name, task.state.name if task.state else "?", seconds))
        return sorted(rows, key=lambda r: r[0])


def timed_run(recipe: str, overrides: list[str]) -> tuple[float, object]:
    start = time.perf_counter()
    state = pipeline(recipe=recipe, overrides=overrides, return_state=True)
    return time.perf_counter() - start, state


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--recipe", default="default")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        overrides = [f"storage.root={tmp}/artifacts", f"storage.reports={tmp}/reports"]
        for label in ("first run", "identical re-run"):
            seconds, state = timed_run(args.recipe, overrides)
            print(f"{label}: {seconds:.1f} s, final state {state.name}")
            for name, final, stage_seconds in asyncio.run(
                stage_times(state.state_details.flow_run_id)
            ):
                print(f"  {name:40s} {final:10s} {stage_seconds:7.1f} s")


if __name__ == "__main__":
    main()
