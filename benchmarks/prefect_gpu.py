"""A pipeline run through Prefect on one GPU machine, started the way the UI's Run button does.

    python -m benchmarks.prefect_gpu --recipe gpu-qwen0.5b --out DIR [--set KEY=VALUE ...]
        [--home /tmp/argen-prefect] [--timeout 3000]

Starts a Prefect server, a process worker on each pool (`cpu` and `gpu`, as `make server`
does), deploys `prefect.yaml`, and sends `POST /api/deployments/{id}/create_flow_run` for
`argen-pipeline/pipeline` with the recipe and overrides as parameters. The gpu recipes name the
gpu pool's deployments for training, merge and both evaluations, so those run as child flow
runs on the `gpu` worker. The run is followed to a terminal state, printing each flow run's
state changes, then DIR receives `flow_runs.json` (every flow run of the pipeline with its pool,
state and duration), `task_runs.json` (every task run with state and duration), `logs.txt`
(their logs in time order) and `artifacts.json` with `report.md` (the report artifact as the
server stored it).

The server's database: `PREFECT_API_DATABASE_CONNECTION_URL` if set (PostgreSQL for anything
shared, as `make server` sets up); otherwise SQLite in HOME, which serves one run on one
machine (a GPU machine without PostgreSQL) since nothing else writes to it.
"""

import argparse
import json
import logging
import os
import time
from pathlib import Path

import httpx

from flows.server import (
    POOLS,
    create_pools_and_deploy,
    prefect_env,
    start_server,
    start_worker,
    stop,
)

log = logging.getLogger("prefect_gpu")

TERMINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}
PIPELINE = "argen-pipeline/pipeline"


def press_run(api: httpx.Client, parameters: dict) -> str:
    """What the UI's Run button sends; returns the new flow run's id."""
    deployment = api.get(f"/deployments/name/{PIPELINE}").raise_for_status().json()
    body = {"state": {"type": "SCHEDULED", "message": "Run from benchmarks.prefect_gpu"}}
    response = api.post(
        f"/deployments/{deployment['id']}/create_flow_run", json=body | {"parameters": parameters}
    )
    return response.raise_for_status().json()["id"]


def family(api: httpx.Client, root: str) -> list[dict]:
    """The pipeline's flow run and every flow run started from it (child deployments)."""
    runs = api.post("/flow_runs/filter", json={"sort": "START_TIME_ASC", "limit": 200}).json()
    by_id = {r["id"]: r for r in runs}
    parent_task = {
        t["id"]: t["flow_run_id"]
        for t in api.post("/task_runs/filter", json={"limit": 200}).raise_for_status().json()
    }

    def root_of(run: dict) -> str:
        while run.get("parent_task_run_id") in parent_task:
            run = by_id.get(parent_task[run["parent_task_run_id"]], run)
            if run["id"] == root:
                break
        return run["id"]

    return [r for r in runs if r["id"] == root or root_of(r) == root]


def follow(api: httpx.Client, root: str, timeout: float) -> dict:
    """Print each flow run's state changes until the pipeline run is terminal."""
    seen: dict[str, str] = {}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for run in family(api, root):
            state = run["state"]["name"] if run.get("state") else "?"
            if seen.get(run["id"]) != state:
                seen[run["id"]] = state
                log.info("%-28s %-10s %s", run["name"], run.get("work_pool_name") or "-", state)
        pipeline = api.get(f"/flow_runs/{root}").json()
        if pipeline["state"]["type"] in TERMINAL:
            return pipeline
        time.sleep(5)
    log.error("the pipeline run %s did not finish within %.0f s", root, timeout)
    return api.get(f"/flow_runs/{root}").json()


def duration(run: dict) -> float | None:
    return run.get("total_run_time") or run.get("estimated_run_time")


def collect(api: httpx.Client, root: str, out: Path) -> None:
    """Save the run's flow runs, task runs, logs and artifacts as the server stored them."""
    runs = family(api, root)
    ids = [r["id"] for r in runs]
    flows = [
        {
            "id": r["id"],
            "name": r["name"],
            "deployment_id": r.get("deployment_id"),
            "work_pool": r.get("work_pool_name"),
            "state": r["state"]["name"],
            "start": r.get("start_time"),
            "end": r.get("end_time"),
            "seconds": duration(r),
        }
        for r in runs
    ]
    where = {"flow_runs": {"id": {"any_": ids}}}
    tasks = api.post("/task_runs/filter", json=where | {"limit": 200}).json()
    task_rows = [
        {
            "flow_run": t["flow_run_id"],
            "name": t["name"],
            "state": t["state"]["name"] if t.get("state") else None,
            "run_count": t.get("run_count"),
            "start": t.get("start_time"),
            "end": t.get("end_time"),
            "seconds": duration(t),
        }
        for t in tasks
    ]
    logs = api.post(
        "/logs/filter", json={"logs": {"flow_run_id": {"any_": ids}}, "sort": "TIMESTAMP_ASC"}
    ).json()
    artifacts = api.post("/artifacts/filter", json=where).json()
    out.mkdir(parents=True, exist_ok=True)
    (out / "flow_runs.json").write_text(json.dumps(flows, indent=1))
    (out / "task_runs.json").write_text(json.dumps(task_rows, indent=1))
    names = {r["id"]: r["name"] for r in runs}
    (out / "logs.txt").write_text(
        "".join(
            f"{e['timestamp']} {names.get(e['flow_run_id'], '?')} {e['message']}\n" for e in logs
        )
    )
    (out / "artifacts.json").write_text(json.dumps(artifacts, indent=1))
    report = [a for a in artifacts if a.get("key") == "argen-report"]
    if report:
        (out / "report.md").write_text(report[-1]["data"])


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--recipe", default="gpu-qwen0.5b")
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--home", type=Path, default=Path("/tmp/argen-prefect"))
    parser.add_argument("--port", type=int, default=4200)
    parser.add_argument("--timeout", type=float, default=3000)
    args = parser.parse_args()
    home = args.home.resolve()
    env = prefect_env(home, args.port, fast_polling=True)
    env.setdefault("PREFECT_API_DATABASE_CONNECTION_URL", f"sqlite+aiosqlite:///{home}/prefect.db")
    os.environ.update(env)
    logs = home / "logs"
    procs = [start_server(env, logs / "server.log")]
    try:
        create_pools_and_deploy(env)
        procs += [start_worker(pool, env, logs / f"worker-{pool}.log") for pool in POOLS]
        with httpx.Client(base_url=env["PREFECT_API_URL"], timeout=30) as api:
            parameters = {"recipe": args.recipe, "overrides": args.overrides}
            root = press_run(api, parameters)
            log.info("pressed Run on %s: flow run %s %s", PIPELINE, root, parameters)
            final = follow(api, root, args.timeout)
            collect(api, root, args.out)
        for name in ("server", *(f"worker-{pool}" for pool in POOLS)):
            (args.out / f"{name}.log").write_bytes((logs / f"{name}.log").read_bytes())
        log.info("pipeline %s; evidence in %s", final["state"]["name"], args.out)
    finally:
        for proc in reversed(procs):
            stop(proc)


if __name__ == "__main__":
    main()
