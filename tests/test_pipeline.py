"""The stage table (`argen.pipeline.STAGES`, `run_stage`) and the pipeline's one definition
(`run_pipeline`): the order of the stages and what each is handed, whichever runner (this
process, or a Prefect flow's) runs them."""

import dataclasses
import json
from pathlib import Path

import pytest

from argen import pipeline
from argen.config import load_config
from argen.errors import ArgenError
from argen.outputs import Adapter, CuratedSplits, Evaluation, Merged, Report, check_inputs
from argen.pipeline import STAGES, run_pipeline, run_stage


class Recorder:
    """A runner that records each call and answers with a directory named after it."""

    def __init__(self):
        self.calls = []

    def run(self, name, config, /, **inputs):
        self.calls.append((name, inputs))
        return Path(f"{name}-{inputs.get('label', 'out')}")


def test_the_pipeline_runs_its_stages_in_order_and_hands_each_its_inputs():
    config = load_config()
    runner = Recorder()
    outputs = run_pipeline(config, "line", runner)
    base = config.model.base
    test = Path("curate-out/test.parquet")
    assert runner.calls == [
        ("curate", {}),
        ("evaluate", {"model": base, "scenarios": test, "label": "baseline"}),
        (
            "train",
            {
                "model": base,
                "train_split": Path("curate-out/train.parquet"),
                "validation_split": Path("curate-out/validation.parquet"),
            },
        ),
        ("merge", {"model": base, "adapter": Path("train-out")}),
        ("evaluate", {"model": "merge-out", "scenarios": test, "label": "aligned"}),
        (
            "report",
            {
                "baseline": Path("evaluate-baseline/results.parquet"),
                "aligned": Path("evaluate-aligned/results.parquet"),
                "training_log": Path("train-out/training_log.parquet"),
                "name": "line",
            },
        ),
    ]
    assert outputs == {
        "curate": Path("curate-out"),
        "baseline": Path("evaluate-baseline"),
        "train": Path("train-out"),
        "merge": Path("merge-out"),
        "aligned": Path("evaluate-aligned"),
        "report": Path("report-out"),
    }


def test_with_the_warm_start_on_grpo_continues_its_adapter():
    config = load_config("default", ["sft.enabled=true"])
    runner = Recorder()
    outputs = run_pipeline(config, "line", runner)
    names = [name for name, _ in runner.calls]
    assert names == ["curate", "evaluate", "sft", "train", "merge", "evaluate", "report"]
    splits = {
        "train_split": Path("curate-out/train.parquet"),
        "validation_split": Path("curate-out/validation.parquet"),
    }
    assert runner.calls[2] == ("sft", {"model": config.model.base, **splits})
    assert runner.calls[3][1] == {
        "model": config.model.base,
        **splits,
        "warm_start": Path("sft-out"),
    }
    assert outputs["sft"] == Path("sft-out")


def test_preference_tuning_continues_the_warm_start_and_grpo_continues_it():
    config = load_config("default", ["sft.enabled=true", "prefer.enabled=true"])
    runner = Recorder()
    outputs = run_pipeline(config, "line", runner)
    names = [name for name, _ in runner.calls]
    assert names == ["curate", "evaluate", "sft", "prefer", "train", "merge", "evaluate", "report"]
    assert runner.calls[3][1]["warm_start"] == Path("sft-out")
    assert runner.calls[4][1]["warm_start"] == Path("prefer-out")
    assert outputs["sft"] == Path("sft-out") and outputs["prefer"] == Path("prefer-out")


def test_preference_tuning_without_a_warm_start_is_a_config_error():
    with pytest.raises(ArgenError, match="set sft.enabled too"):
        load_config("default", ["prefer.enabled=true"])


def test_each_stage_is_one_entry_of_the_table():
    """Name, output type, key and run: one entry per stage, the outputs' table agrees."""
    assert list(STAGES) == [
        "curate",
        "evaluate",
        "judge",
        "sft",
        "prefer",
        "train",
        "merge",
        "report",
    ]
    for name, stage in STAGES.items():
        assert stage.name == name
        assert callable(stage.key) and callable(stage.run)
    outputs = [stage.output for stage in STAGES.values()]
    assert outputs == [
        CuratedSplits,
        Evaluation,
        Evaluation,
        Adapter,
        Adapter,
        Adapter,
        Merged,
        Report,
    ]
    with pytest.raises(ArgenError, match="unknown stage 'nope'"):
        run_stage("nope", load_config())


@pytest.fixture
def fake_curate(monkeypatch):
    """The curate entry with a run that only writes its sidecar, recording each call."""
    calls = []

    def run(config, out):
        calls.append(out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "manifest.json").write_text("{}")
        return out

    monkeypatch.setitem(STAGES, "curate", dataclasses.replace(STAGES["curate"], run=run))
    return calls


def test_a_complete_keyed_output_is_reused_and_an_incomplete_one_computed(tmp_path, fake_curate):
    """`run_stage` is the one cache: it computes into the keyed directory once, then reuses it;
    a directory without its sidecar (a stage that stopped part-way) is computed again."""
    config = load_config("default", [f"storage.root={tmp_path}"])
    out = pipeline.stage_out("curate", config)
    assert out.parent == tmp_path / "curate"
    assert run_stage("curate", config) == (out, False)
    assert run_stage("curate", config) == (out, True)
    assert pipeline.run_curate(config) == out and fake_curate == [out]
    (out / "manifest.json").unlink()
    assert run_stage("curate", config) == (out, False)
    assert fake_curate == [out, out]


def test_an_explicit_out_is_computed_even_when_complete(tmp_path, fake_curate):
    config = load_config("default", [f"storage.root={tmp_path}"])
    out = tmp_path / "mine"
    assert run_stage("curate", config, out) == (out, False)
    assert run_stage("curate", config, out) == (out, False)
    assert fake_curate == [out, out]


def test_keys_hash_content_and_leave_run_options_out(tmp_path, monkeypatch):
    """The key hashes inputs' content, not their paths; `options` (a progress callback) change
    nothing; a model spec is resolved once before keying."""
    monkeypatch.setattr(pipeline, "resolve_model", lambda spec: Path(spec))
    config = load_config("default", [f"storage.root={tmp_path}"])
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    a.write_text("same")
    b.write_text("same")
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    split = {"train_split": a, "validation_split": a}
    first = pipeline.stage_out("train", config, model=str(model), **split)
    other = {"train_split": b, "validation_split": b}
    assert pipeline.stage_out("train", config, model=str(model), callbacks=(1,), **other) == first
    b.write_text("edited")
    assert pipeline.stage_out("train", config, model=str(model), **other) != first
    report = pipeline.stage_out("report", config, baseline=a, aligned=a, name="line")
    assert report.parent == config.storage.reports and report.name.startswith("line-")


@pytest.fixture
def fake_curate_files(monkeypatch):
    """The curate entry with a run that writes a split and its sidecar, recording each call."""
    calls = []

    def run(config, out):
        calls.append(out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "test.parquet").write_text("rows")
        (out / "manifest.json").write_text('{"stage": "curate"}')
        return out

    monkeypatch.setitem(STAGES, "curate", dataclasses.replace(STAGES["curate"], run=run))
    return calls


def test_a_reused_output_is_checked_against_its_record(tmp_path, fake_curate_files, caplog):
    """Every output run_stage makes is sealed; a keyed output whose file changed, went missing
    or whose record lists no files (an older ArGen's) is computed again, with a warning."""
    config = load_config("default", [f"storage.root={tmp_path}"])
    out, _ = run_stage("curate", config)
    record = CuratedSplits(out).read()
    assert record.stage == "curate" and record.files and set(record.files) == {"test.parquet"}
    assert run_stage("curate", config) == (out, True)
    (out / "test.parquet").write_text("ROWS")
    assert run_stage("curate", config) == (out, False)
    assert "test.parquet does not match its recorded SHA-256" in caplog.text
    assert run_stage("curate", config) == (out, True)
    (out / "manifest.json").write_text('{"stage": "curate"}')  # an older ArGen's record
    assert run_stage("curate", config) == (out, False)
    assert len(fake_curate_files) == 3


def test_an_input_changed_after_its_stage_wrote_it_is_refused(
    tmp_path, fake_curate_files, monkeypatch
):
    monkeypatch.setattr(pipeline, "resolve_model", lambda spec: Path(spec))
    config = load_config("default", [f"storage.root={tmp_path}"])
    out, _ = run_stage("curate", config)
    split = CuratedSplits(out).test
    check_inputs({"scenarios": split, "label": "x"})  # as written: accepted
    split.write_text("ROWS")
    with pytest.raises(ArgenError, match=r"scenarios: .*test\.parquet does not match its recorded"):
        run_stage("evaluate", config, model="m", scenarios=split, label="x")
    check_inputs({"scenarios": tmp_path / "elsewhere.parquet"})  # not an output


def sealed(folder: Path, stage: str, sidecar: str = "manifest.json", **record) -> Path:
    folder.mkdir(parents=True)
    (folder / "weights.bin").write_bytes(b"w")
    (folder / sidecar).write_text(json.dumps(record))
    STAGES[stage].output(folder).seal(stage)
    return folder


def test_overwrite_replaces_only_an_output_of_the_same_stage(tmp_path):
    adapter = sealed(tmp_path / "adapter", "train")
    with pytest.raises(ArgenError, match="holds an argen train output, not an argen curate"):
        pipeline.check_out("curate", adapter, overwrite=True)
    assert pipeline.check_out("train", adapter, overwrite=True) == adapter
    evaluation = sealed(tmp_path / "eval", "evaluate", "summary.json")
    with pytest.raises(ArgenError, match="holds an argen evaluate output, not an argen report"):
        pipeline.check_out("report", evaluation, overwrite=True)
    older = tmp_path / "older"
    older.mkdir()
    (older / "summary.json").write_text(json.dumps({"gate_passed": True, "verdict": []}))
    with pytest.raises(ArgenError, match="names no stage"):
        pipeline.check_out("report", older, overwrite=True)
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "manifest.json").write_text(json.dumps({"name": "my project"}))
    with pytest.raises(ArgenError, match="names no stage"):
        pipeline.check_out("curate", theirs, overwrite=True)
    (adapter / "notes.txt").write_text("mine")
    with pytest.raises(ArgenError, match=r"does not list \(notes.txt\)"):
        pipeline.check_out("train", adapter, overwrite=True)
    assert (adapter / "notes.txt").read_text() == "mine"
