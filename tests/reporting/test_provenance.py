"""The provenance block: what a report compared, followed from its inputs' records to the top of
the report and into summary.json; the report stage keys on the audit grader and the config."""

import json
import re

import pytest

from argen import pipeline
from argen.config import ReportConfig, load_config
from argen.evaluation.audit import AuditGrader
from argen.judging.reader import OUTPUTS
from argen.reporting.compare import compare
from argen.reporting.provenance import Records, provenance
from argen.reporting.report import write_report
from tests.evaluation.test_audit import other_grader
from tests.fake_audit import TaggedGrader, tag_probabilities
from tests.reporting.test_compare import synthetic, write

HARDWARE = {"accelerator": "NVIDIA H100 80GB HBM3", "cpus": 16, "platform": "Linux x86_64"}


def record(folder, name, **fields):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(fields))
    return folder


@pytest.fixture
def run(tmp_path):
    """A pipeline run's records: a curation, the base and merged models, the adapter, and both
    evaluations of the curated test split."""
    curated = record(
        tmp_path / "curate",
        "manifest.json",
        stage="curate",
        config={"seed": 13},
        inputs={"data/scenarios/clinical.jsonl": "ab" * 32},
        outputs={"train.parquet": "11" * 32, "test.parquet": "22" * 32},
    )
    adapter = record(
        tmp_path / "adapter",
        "manifest.json",
        stage="train",
        steps=120,
        code_version="0.1.0+train",
        config={"train": {"seed": 3}, "judge": "local/minilm-x"},
        hardware=HARDWARE,
    )
    merged = record(
        tmp_path / "merged",
        "manifest.json",
        stage="merge",
        adapter=str(adapter),
        adapter_sha256="cd" * 32,
    )
    results = {}
    for label, model, seed in (("baseline", tmp_path / "base-model", 1), ("aligned", merged, 2)):
        folder = tmp_path / label
        results[label] = write(synthetic(seed, judge="local/minilm-x"), folder)
        settings = {"generation": {"seed": 7}, "scenarios_sha256": "22" * 32}
        record(
            folder,
            "summary.json",
            label=label,
            model_dir=str(model),
            model_sha256=("ef" if label == "baseline" else "12") * 32,
            scenarios=str(curated / "test.parquet"),
            settings=settings,
            code_version="0.1.0+eval",
            hardware=HARDWARE,
        )
    return results, adapter


def test_the_records_are_followed_from_the_results(run):
    results, adapter = run
    records = Records.gather(results["baseline"], results["aligned"])
    assert records.merge["adapter"] == str(adapter)
    assert records.training["steps"] == 120 and records.reward_judge == "local/minilm-x"
    assert records.curation["config"] == {"seed": 13}
    assert Records.gather(results["baseline"], results["aligned"], adapter / "log.parquet") == (
        records
    )


def test_the_block_heads_the_report_and_fills_summary_json(run, tmp_path):
    results, _ = run
    config = load_config("gpu-qwen0.5b")
    records = Records.gather(results["baseline"], results["aligned"])
    result = compare(
        results["baseline"],
        results["aligned"],
        ReportConfig(),
        TaggedGrader(),
        records.reward_judge,
    )
    block = provenance(config, "line", result.paired, result.judge, result.audit, records)
    assert block["base_model"]["name"] == "qwen2.5-coder-0.5b-instruct"
    assert len(block["base_model"]["packaged_sha256"]) == 64
    assert block["baseline"]["weights_sha256"] == "ef" * 32
    assert block["aligned"]["adapter_sha256"] == "cd" * 32
    assert block["training"]["reward_judge"] == "local/minilm-x"
    assert block["seeds"] == {"curate": 13, "train": 3, "generation": 7, "judge": 0, "report": 0}
    assert block["scenarios"]["splits_sha256"] == {
        "train.parquet": "11" * 32,
        "test.parquet": "22" * 32,
    }
    assert block["scenarios"]["n"] == len(result.paired)
    assert block["hardware"]["training"] == HARDWARE
    assert block["audit"]["independent"] is True
    out = write_report(result, tmp_path / "report", "Title", provenance=block)
    markdown = (out / "report.md").read_text()
    top = markdown.split("## Verdict")[0]
    assert top.startswith("# Title\n\n## Provenance")
    for fact in (
        "qwen2.5-coder-0.5b-instruct (packaged file `",
        f"{tmp_path / 'merged'} (weights `1212121212121212`)",
        "120 steps, seed 3, reward judge local/minilm-x",
        "local/minilm-x, rubric r1",
        "tagged (files 00000000), threshold 0.5; independent of the reward",
        "train.parquet `1111111111111111`",
        "curate 13, train 3, generation 7, judge 0, report 0",
        "NVIDIA H100 80GB HBM3 (16 CPUs; Linux x86_64)",
        "evaluations 0.1.0+eval / 0.1.0+eval; training 0.1.0+train",
    ):
        assert fact in top, fact
    summary = json.loads((out / "summary.json").read_text())
    assert summary["provenance"]["config_sha256"] == block["config_sha256"]
    assert summary["provenance"]["run"] == "line"


def test_what_no_record_holds_is_not_recorded(tmp_path):
    a, b = write(synthetic(1), tmp_path / "a"), write(synthetic(2), tmp_path / "b")
    records = Records.gather(a, b)
    result = compare(a, b, ReportConfig(), TaggedGrader())
    block = provenance(load_config(), "x", result.paired, result.judge, result.audit, records)
    assert block["training"]["reward_judge"] is None and block["aligned"]["adapter"] is None
    top = (write_report(result, tmp_path / "r", provenance=block) / "report.md").read_text()
    assert re.search(r"\| adapter +\| not recorded \(not recorded\)", top)
    assert re.search(r"\| hardware: training +\| not recorded", top)


@pytest.fixture
def tagged_reader(monkeypatch):
    """The real audit grader of the report stage, predicting from tags (no model loaded)."""
    monkeypatch.setattr(
        AuditGrader, "probabilities", lambda self, pairs: tag_probabilities(pairs, OUTPUTS)
    )


def test_the_report_stage_audits_and_keys_on_the_grader_and_config(run, tmp_path, tagged_reader):
    results, _ = run
    config = load_config("default", [f"storage.reports={tmp_path / 'reports'}"])
    inputs = {"baseline": results["baseline"], "aligned": results["aligned"], "name": "line"}
    out, reused = pipeline.run_stage("report", config, **inputs)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["audit"]["grader"] == "audit-minilm" and summary["audit"]["independent"]
    assert summary["provenance"]["training"]["reward_judge"] == "local/minilm-x"
    assert (out / "reading-sheet.md").is_file() and not reused
    assert pipeline.run_stage("report", config, **inputs) == (out, True)
    other = config.model_copy(deep=True)
    other.audit.grader = other_grader(tmp_path / "other-grader")
    assert pipeline.stage_out("report", other, **inputs) != out
    other = load_config("default", [f"storage.reports={tmp_path / 'reports'}", "train.seed=5"])
    assert pipeline.stage_out("report", other, **inputs) != out
