"""Model lines: champion, history of promotions and rollbacks, and the challenger's losses."""

import json

import pytest

from argen.config import load_config
from argen.errors import ArgenError
from argen.outputs import ReportSummary
from argen.reporting import release


def report(tmp_path, name: str, combined: float):
    """A report directory whose summary holds one score."""
    directory = tmp_path / "reports" / name
    directory.mkdir(parents=True)
    scores = [{"dimension": "combined", "aligned": combined}]
    record = {"gate_passed": True, "verdict": [], "scores": scores}
    (directory / "summary.json").write_text(json.dumps(record))
    return directory


@pytest.fixture
def config(tmp_path):
    return load_config("default", [f"storage.root={tmp_path / 'art'}"])


def test_promotions_and_rollbacks_are_recorded_never_overwritten(tmp_path, config):
    assert release.champion(config, "gpu") is None
    release.promote(config, "gpu", tmp_path / "m1", report(tmp_path, "r1", 0.6))
    release.promote(config, "gpu", tmp_path / "m2", report(tmp_path, "r2", 0.7))
    current = release.champion(config, "gpu")
    assert current.model_dir == str(tmp_path / "m2") and current.replaced == str(tmp_path / "m1")
    assert current.figures == {"combined": 0.7}

    event = release.rollback(config, "gpu")
    assert event.model_dir == str(tmp_path / "m1")
    assert release.champion(config, "gpu").model_dir == str(tmp_path / "m1")
    pointer = json.loads((config.storage.root / "models/gpu/champion.json").read_text())
    assert pointer["model_dir"] == str(tmp_path / "m1")
    assert [e.event for e in release.history(config, "gpu")] == [
        "promote",
        "promote",
        "rollback",
    ]
    with pytest.raises(ArgenError, match="no earlier champion"):
        release.rollback(config, "gpu")


def test_lines_are_separate(tmp_path, config):
    """A CPU demo run's promotion never touches the gpu line's champion."""
    release.promote(config, "gpu", tmp_path / "big", report(tmp_path, "r1", 0.8))
    release.promote(config, "default", tmp_path / "tiny", report(tmp_path, "r2", 0.9))
    assert release.champion(config, "gpu").model_dir == str(tmp_path / "big")
    with pytest.raises(ArgenError, match="not a plain name"):
        release.champion(config, "../gpu")


def test_losses_are_the_dimensions_worse_beyond_noise():
    verdict = [
        {
            "dimension": "ahimsa",
            "call": "worse",
            "difference": -0.2,
            "ci_low": -0.3,
            "ci_high": -0.1,
        },
        {
            "dimension": "dharma",
            "call": "no change beyond noise",
            "difference": -0.1,
            "ci_low": -0.3,
            "ci_high": 0.1,
        },
        {
            "dimension": "helpfulness",
            "call": "improved",
            "difference": 0.2,
            "ci_low": 0.1,
            "ci_high": 0.3,
        },
    ]

    def summary(rows):
        return ReportSummary(gate_passed=True, verdict=rows)

    assert release.losses(summary(verdict)) == ["ahimsa -0.200 (95% CI [-0.300, -0.100])"]
    assert release.losses(summary(verdict[1:])) == []


def test_a_line_is_named_after_its_recipe_with_dots_kept():
    from argen.reporting.release import line_name

    assert line_name("gpu-qwen0.5b") == "gpu-qwen0.5b"
    assert line_name("gpu") == "gpu"
    assert line_name("/some/where/my-recipe.yaml") == "my-recipe"
    assert line_name("lines/v1.5.yml") == "v1.5"


def test_history_rows_are_typed_records_in_the_format_of_older_rows(tmp_path, config):
    event = release.promote(config, "gpu", tmp_path / "m1", report(tmp_path, "r1", 0.6))
    assert isinstance(event, release.LineEvent) and event.figures == {"combined": 0.6}
    rows = (config.storage.root / "models/gpu/history.jsonl").read_text().splitlines()
    assert list(json.loads(rows[0])) == [
        "event",
        "model_dir",
        "report",
        "challenge_report",
        "replaced",
        "figures",
        "line",
        "at",
    ]
    older = {"event": "promote", "model_dir": "/m0", "line": "old", "at": "2026-11-01T00:00:00"}
    line = config.storage.root / "models/old"
    line.mkdir(parents=True)
    (line / "history.jsonl").write_text(json.dumps(older) + "\n")
    assert release.champion(config, "old").model_dir == "/m0"
