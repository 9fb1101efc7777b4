"""The pipeline against a real Prefect server: deployments from prefect.yaml, process workers
for the cpu and gpu pools, runs triggered as the UI's Run button does."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pandas as pd
import pytest

from tests.conftest import write_jsonl
from tests.prefect_stack import TERMINAL, deployment_id

pytestmark = pytest.mark.slow

STAGES = {"curate", "evaluate", "train", "merge", "report"}


def press_run(api: httpx.Client, parameters: dict, timeout: float = 900) -> dict:
    """What the UI's Run button sends, then poll the run until it ends."""
    pipeline = deployment_id(api, "argen-pipeline/pipeline")
    created = api.post(
        f"/deployments/{pipeline}/create_flow_run",
        json={
            "state": {"type": "SCHEDULED", "message": "Run from the Prefect UI"},
            "parameters": parameters,
        },
    )
    created.raise_for_status()
    run_id = created.json()["id"]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        response = api.get(f"/flow_runs/{run_id}")
        run = response.json() if response.status_code == 200 else {"state": {"type": "?"}}
        if run["state"]["type"] in TERMINAL:
            return run
        time.sleep(2)
    raise AssertionError(f"flow run {run_id} did not finish within {timeout} s")


def task_runs(api: httpx.Client, flow_run_ids: list[str]) -> list[dict]:
    response = api.post("/task_runs/filter", json={"flow_runs": {"id": {"any_": flow_run_ids}}})
    response.raise_for_status()
    return response.json()


def train_children(api: httpx.Client) -> list[dict]:
    train = deployment_id(api, "argen-train/train-gpu")
    response = api.post(
        "/flow_runs/filter",
        json={"deployments": {"id": {"any_": [train]}}, "sort": "START_TIME_DESC"},
    )
    return response.json()


def stage_states(api: httpx.Client, run: dict) -> dict[str, list[str]]:
    """State names of every stage task of a pipeline run and of its training child."""
    child = train_children(api)[0]
    states: dict[str, list[str]] = {}
    for task in task_runs(api, [run["id"], child["id"]]):
        stage = task["name"].split()[0]
        if stage in STAGES:
            states.setdefault(stage, []).append(task["state"]["name"])
    return states


def run_detail(run: dict, home: Path) -> str:
    logs = "".join((home / f).read_text()[-3000:] for f in ("worker-cpu.log", "worker-gpu.log"))
    return f"run ended {run['state']['type']}: {run['state'].get('message')}\n{logs}"


def test_pipeline_runs_caches_and_reruns(stack, recipe, judge_server):
    api, home = stack
    recipe_path, source = recipe

    first = press_run(api, {"recipe": str(recipe_path), "max_steps": 2})
    assert first["state"]["type"] == "COMPLETED", run_detail(first, home)
    child = train_children(api)[0]
    assert child["state"]["type"] == "COMPLETED"
    assert child["work_pool_name"] == "gpu" and first["work_pool_name"] == "cpu"
    artifacts = api.post(
        "/artifacts/filter", json={"artifacts": {"key": {"any_": ["argen-report"]}}}
    ).json()
    assert artifacts and "## Verdict" in artifacts[0]["data"]
    assert "Release gate" in artifacts[0]["data"]
    names = {a["key"] for a in api.post("/artifacts/filter", json={}).json()}
    assert {"argen-report", "argen-summary", "argen-training-progress"} <= names

    second = press_run(api, {"recipe": str(recipe_path), "max_steps": 2})
    assert second["state"]["type"] == "COMPLETED", run_detail(second, home)
    states = stage_states(api, second)
    assert set(states) == STAGES and len(states["evaluate"]) == 2
    assert all(s == "Cached" for names in states.values() for s in names), states

    # Edit one scenario and make the judge fail once: curation and everything downstream
    # rerun, and the failed judging step is retried by Prefect.
    # (one prompt of the test split and one of the train split, so every stage's inputs change;
    # an edit to the test split alone would rightly leave training cached)
    (curated,) = recipe_path.parent.glob("art/curate/*")
    targets = {pd.read_parquet(curated / f"{s}.parquet")["id"].iloc[0] for s in ("test", "train")}
    rows = [json.loads(line) for line in source.read_text().splitlines()]
    for row in rows:
        if row["id"] in targets:
            row["prompt"] += " It started two days ago."
    write_jsonl(source, rows)
    judge_server.faults.append("500")  # judge_server retries are off: one item fails once
    third = press_run(api, {"recipe": str(recipe_path), "max_steps": 2})
    assert third["state"]["type"] == "COMPLETED", run_detail(third, home)
    states = stage_states(api, third)
    assert all(s == "Completed" for names in states.values() for s in names), states
    retried = [t for t in task_runs(api, [third["id"]]) if t["run_count"] > 1]
    assert retried, "the judge fault was not retried"


def test_schedule_and_dataset_trigger(stack, recipe):
    """The weekly schedule exists, and `argen notify-dataset` starts a pipeline run."""
    api, home = stack
    pipeline = api.get("/deployments/name/argen-pipeline/pipeline").json()
    crons = [s["schedule"].get("cron") for s in pipeline["schedules"]]
    assert "0 3 * * 1" in crons
    # Pause the cpu pool so the triggered run waits instead of running the default recipe.
    assert api.patch("/work_pools/cpu", json={"is_paused": True}).status_code == 204
    before = {
        r["id"]
        for r in api.post(
            "/flow_runs/filter", json={"deployments": {"id": {"any_": [pipeline["id"]]}}}
        ).json()
    }
    env = {
        **os.environ,
        "PREFECT_API_URL": str(api.base_url).rstrip("/"),
        "PREFECT_HOME": str(home),
    }
    recipe_path, _ = recipe
    done = subprocess.run(
        [sys.executable, "-m", "flows.cli", "notify-dataset", "--recipe", str(recipe_path)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "emitted argen.dataset.updated" in done.stdout
    again = subprocess.run(
        [sys.executable, "-m", "flows.cli", "notify-dataset", "--recipe", str(recipe_path)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "unchanged" in again.stdout  # no second event for the same sources
    deadline = time.monotonic() + 60
    new = set()
    while time.monotonic() < deadline and not new:
        runs = api.post(
            "/flow_runs/filter", json={"deployments": {"id": {"any_": [pipeline["id"]]}}}
        ).json()
        new = {r["id"] for r in runs} - before
        time.sleep(1)
    assert new, "the dataset event did not start a pipeline run"
    for run_id in new:
        api.delete(f"/flow_runs/{run_id}")
    assert api.patch("/work_pools/cpu", json={"is_paused": False}).status_code == 204
