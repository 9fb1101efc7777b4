"""An adapter checked against its base on named splits: merged once, evaluated on each split,
reported against that split's own baseline, bundled per adapter and split."""

import json
import tarfile
from pathlib import Path

import pandas as pd

from argen.config import load_config
from benchmarks import adapter_eval


def stage_folder(path, results: bool = True):
    """A stage output folder with the files the bundle reads."""
    path.mkdir(parents=True)
    if results:
        pd.DataFrame({"id": ["a"], "response": [path.name]}).to_parquet(path / "results.parquet")
    verdict = [{"dimension": "dharma", "call": path.name}]
    summary = {"verdict": verdict, "gate": [], "gate_passed": False}
    (path / "summary.json").write_text(json.dumps(summary))
    return path


def test_each_split_is_reported_against_its_own_baseline_and_bundled(tmp_path, monkeypatch):
    calls = []

    def merge(config, model, adapter):
        calls.append(("merge", adapter.name))
        return tmp_path / f"merged-{adapter.name}"

    def evaluate(config, model, scenarios, label):
        calls.append(("evaluate", Path(model).name, scenarios.stem, label))
        return stage_folder(tmp_path / f"eval-{scenarios.stem}")

    def report(config, baseline, aligned, name):
        calls.append(("report", baseline.parent.name, aligned.parent.name, name))
        return stage_folder(tmp_path / f"report-{name}", results=False)

    monkeypatch.setattr(adapter_eval, "run_merge", merge)
    monkeypatch.setattr(adapter_eval, "run_evaluate", evaluate)
    monkeypatch.setattr(adapter_eval, "run_report", report)
    config = load_config()
    splits = {"validation": tmp_path / "validation.parquet", "test": tmp_path / "test.parquet"}
    baselines = {name: stage_folder(tmp_path / f"base-{name}") for name in ("validation", "test")}
    adapter = tmp_path / "r2-seed0"
    folders = {adapter.name: adapter_eval.evaluate_adapter(config, adapter, splits, baselines)}
    assert calls == [
        ("merge", "r2-seed0"),
        ("evaluate", "merged-r2-seed0", "validation", "aligned"),
        ("report", "base-validation", "eval-validation", "r2-seed0-validation"),
        ("evaluate", "merged-r2-seed0", "test", "aligned"),
        ("report", "base-test", "eval-test", "r2-seed0-test"),
    ]
    adapter_eval.bundle(tmp_path / "out.tgz", folders)
    with tarfile.open(tmp_path / "out.tgz") as tar:
        names = set(tar.getnames())
        assert {
            "r2-seed0/test/report/summary.json",
            "r2-seed0/test/baseline/results.parquet",
            "r2-seed0/test/aligned/results.parquet",
            "r2-seed0/validation/baseline/summary.json",
        } <= names
        baseline = pd.read_parquet(tar.extractfile("r2-seed0/validation/baseline/results.parquet"))
    assert baseline["response"].tolist() == ["base-validation"]
