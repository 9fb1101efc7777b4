"""The release decision (`argen.reporting.release.release`), without Prefect: a failed gate keeps
the champion, a candidate worse than the champion beyond noise loses, anything else is promoted;
`argen run` without an orchestrator releases the same way."""

import json
from pathlib import Path

import pytest

from argen import cli
from argen.config import load_config
from argen.reporting import release


def summary_dir(path: Path, gate_passed: bool = True, worse: bool = False) -> Path:
    """A report folder whose summary has a gate and a verdict (worse on dharma, or not)."""
    path.mkdir(parents=True, exist_ok=True)
    call = "worse" if worse else "improved"
    verdict = [{"dimension": "dharma", "call": call, "difference": -0.2 if worse else 0.2}]
    verdict[0] |= {"ci_low": -0.3, "ci_high": -0.1} if worse else {"ci_low": 0.1, "ci_high": 0.3}
    gate = [{"rule": "dharma violations drop", "evidence": "0.4 -> 0.5", "passed": gate_passed}]
    scores = [{"dimension": "dharma", "baseline": 0.5, "aligned": 0.7, "difference": 0.2}]
    record = {"gate_passed": gate_passed, "gate": gate, "verdict": verdict, "scores": scores}
    (path / "summary.json").write_text(json.dumps(record))
    return path


class Runner:
    """Runs the champion's evaluation and comparison: the comparison says `worse` or not."""

    def __init__(self, tmp_path: Path, worse: bool):
        self.tmp_path, self.worse, self.calls = tmp_path, worse, []

    def run(self, name, config, /, **inputs):
        self.calls.append((name, inputs))
        if name == "evaluate":
            return self.tmp_path / "champion-eval"
        return summary_dir(self.tmp_path / "challenge", worse=self.worse)


def outputs(tmp_path: Path, name: str, gate_passed: bool = True) -> dict[str, Path]:
    return {
        "curate": tmp_path / "curated",
        "merge": tmp_path / f"{name}-merged",
        "aligned": tmp_path / f"{name}-aligned",
        "report": summary_dir(tmp_path / f"{name}-report", gate_passed),
    }


@pytest.fixture
def config(tmp_path):
    return load_config("default", [f"storage.root={tmp_path / 'art'}"])


def test_a_failed_gate_keeps_the_champion(tmp_path, config):
    outcome = release.release(config, "line", outputs(tmp_path, "a", gate_passed=False))
    assert outcome.name == release.GATE_FAILED == "Gate failed"
    assert "dharma violations drop: 0.4 -> 0.5" in outcome.message
    assert release.champion(config, "line") is None


def test_the_first_candidate_is_promoted_then_a_worse_one_loses(tmp_path, config):
    first = outputs(tmp_path, "a")
    outcome = release.release(config, "line", first, Runner(tmp_path, worse=True))
    assert (outcome.name, outcome.challenge) == (release.PROMOTED, None)
    assert release.champion(config, "line").model_dir == str(first["merge"])
    again = release.release(config, "line", first, Runner(tmp_path, worse=True))
    assert again.name == release.ALREADY_CHAMPION

    runner = Runner(tmp_path, worse=True)
    outcome = release.release(config, "line", outputs(tmp_path, "b"), runner)
    assert outcome.name == release.LOST == "Lost to champion"
    assert outcome.message.startswith("worse than the line champion beyond noise: dharma -0.200")
    assert outcome.champion.model_dir == str(first["merge"])
    assert outcome.challenge == tmp_path / "challenge"
    evaluate, report = runner.calls
    assert evaluate == (
        "evaluate",
        {
            "model": str(first["merge"]),
            "scenarios": tmp_path / "curated/test.parquet",
            "label": "champion",
        },
    )
    assert report[1]["name"] == "line-challenge"
    assert report[1]["aligned"] == tmp_path / "b-aligned/results.parquet"
    assert release.champion(config, "line").model_dir == str(first["merge"])

    better = outputs(tmp_path, "c")
    outcome = release.release(config, "line", better, Runner(tmp_path, worse=False))
    assert outcome.name == release.PROMOTED and outcome.challenge == tmp_path / "challenge"
    assert release.champion(config, "line").model_dir == str(better["merge"])


def test_argen_run_without_prefect_releases(tmp_path, monkeypatch, config):
    import argen.pipeline

    done = outputs(tmp_path, "a")
    monkeypatch.setattr(argen.pipeline, "run_pipeline", lambda config, line: done)
    lines = cli.cmd_run(config, "default", [])
    assert lines.splitlines()[0] == f"Promoted: {done['merge']} is now the default champion"
    assert release.champion(config, "default").model_dir == str(done["merge"])


def test_a_report_edited_after_it_was_written_is_never_promoted(tmp_path, config):
    """A gate-failed report whose summary was edited to pass: refused, naming the file."""
    from argen.errors import ArgenError
    from argen.outputs import Report

    done = outputs(tmp_path, "a", gate_passed=False)
    Report(done["report"]).seal("report")
    summary = done["report"] / "summary.json"
    summary.write_text(json.dumps(json.loads(summary.read_text()) | {"gate_passed": True}))
    with pytest.raises(ArgenError, match=r"report: .*summary.json was edited after it was written"):
        release.release(config, "line", done)
    assert release.champion(config, "line") is None
