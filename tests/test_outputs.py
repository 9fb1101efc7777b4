"""Each stage's output directory knows its own files; its sidecar marks it complete and, once
sealed, is a typed record naming its stage, its schema and every file's size and SHA-256."""

import json

import pytest
from pydantic import ValidationError

from argen.outputs import (
    SCHEMA_VERSION,
    Adapter,
    CuratedSplits,
    Evaluation,
    Merged,
    Report,
    ReportSummary,
)
from argen.pipeline import STAGES


def test_an_output_is_complete_only_once_its_sidecar_is_written(tmp_path):
    for stage, entry in STAGES.items():
        out = entry.output(tmp_path / stage)
        out.path.mkdir()
        assert not out.is_complete()
        out.sidecar.write_text(json.dumps({"stage": stage}))
        assert out.is_complete()


def test_files_are_named_by_their_output(tmp_path):
    splits = CuratedSplits(tmp_path / "c")
    assert (splits.train.name, splits.validation.name, splits.test.name) == (
        "train.parquet",
        "validation.parquet",
        "test.parquet",
    )
    evaluation = Evaluation(str(tmp_path / "e"))  # a string path is taken as a Path
    assert Evaluation.of_results(evaluation.results) == evaluation
    assert Adapter(tmp_path / "a").training_log.parent == tmp_path / "a"
    assert Report(tmp_path / "r").markdown.name == "report.md"
    assert Evaluation.SIDECAR == Report.SIDECAR == "summary.json"  # measurements
    assert CuratedSplits.SIDECAR == Adapter.SIDECAR == Merged.SIDECAR == "manifest.json"


def adapter(tmp_path):
    out = Adapter(tmp_path / "adapter")
    (out.path / "wandb").mkdir(parents=True)
    (out.path / "adapter_model.safetensors").write_bytes(b"weights")
    (out.path / "wandb" / "run.log").write_text("log")
    out.sidecar.write_text(json.dumps({"stage": "train", "steps": 3, "judge": {"n": 1}}))
    return out


def test_a_sealed_record_names_its_stage_schema_and_every_files_hash(tmp_path):
    out = adapter(tmp_path)
    record = out.seal("train")
    raw = json.loads(out.sidecar.read_text())
    assert raw["stage"] == "train" and raw["schema_version"] == SCHEMA_VERSION
    assert raw["steps"] == 3 and raw["judge"] == {"n": 1}  # the stage's own fields stay
    assert set(raw["files"]) == {"adapter_model.safetensors", "wandb/run.log"}
    weights = raw["files"]["adapter_model.safetensors"]
    assert weights["size"] == 7 and len(weights["sha256"]) == 64
    assert record.files and record.files["wandb/run.log"].size == 3
    text = out.sidecar.read_text()
    out.seal("train")  # sealing again changes nothing
    assert out.sidecar.read_text() == text
    assert out.problems() == []


def test_problems_name_the_changed_missing_or_unlisted_file(tmp_path):
    out = adapter(tmp_path)
    out.seal("train")
    (out.path / "adapter_model.safetensors").write_bytes(b"weighTs")  # same size
    (out.path / "wandb" / "run.log").unlink()
    (out.path / "extra.txt").write_text("x")
    problems = out.problems()
    assert any(
        "adapter_model.safetensors does not match its recorded SHA-256" in p for p in problems
    )
    assert any("wandb/run.log is missing" in p for p in problems)
    assert any("extra.txt is not part of the output" in p for p in problems)
    assert out.problems(only="extra.txt") == [f"{out.path / 'extra.txt'} is not part of the output"]


def test_an_older_record_still_reads_and_lists_no_files(tmp_path):
    out = Report(tmp_path)
    old = {"gate_passed": True, "verdict": [{"dimension": "dharma", "call": "improved"}]}
    out.sidecar.write_text(json.dumps(old | {"scores": [{"dimension": "dharma", "p_holm": None}]}))
    summary = out.summary()
    assert isinstance(summary, ReportSummary) and summary.gate_passed
    assert summary.stage is None and summary.schema_version is None and summary.files is None
    assert summary.verdict[0].call == "improved" and summary.smoke_run is False
    assert out.record()["scores"] == [{"dimension": "dharma", "p_holm": None}]


def test_a_report_summary_without_its_gate_is_refused(tmp_path):
    out = Report(tmp_path)
    out.sidecar.write_text(json.dumps({"gate_passed": "maybe", "verdict": []}))
    with pytest.raises(ValidationError):
        out.summary()


def test_a_record_edited_after_it_was_sealed_is_a_problem(tmp_path):
    """A summary edited by hand (a failed gate turned into a pass) no longer matches its digest."""
    out = Report(tmp_path / "report")
    out.path.mkdir()
    (out.path / "report.md").write_text("# report")
    out.sidecar.write_text(json.dumps({"gate_passed": False, "verdict": [], "gate": []}))
    out.seal("report")
    assert out.problems() == []
    edited = json.loads(out.sidecar.read_text()) | {"gate_passed": True}
    out.sidecar.write_text(json.dumps(edited, indent=2))
    assert out.problems() == [f"{out.sidecar} was edited after it was written"]
