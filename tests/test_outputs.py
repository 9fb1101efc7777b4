"""Each stage's output directory knows its own files, and its sidecar marks it complete."""

import json

from argen.outputs import STAGE_OUTPUTS, Adapter, CuratedSplits, Evaluation, Merged, Report


def test_an_output_is_complete_only_once_its_sidecar_is_written(tmp_path):
    for stage, kind in STAGE_OUTPUTS.items():
        out = kind(tmp_path / stage)
        out.path.mkdir()
        assert not out.is_complete()
        out.sidecar.write_text(json.dumps({"stage": stage}))
        assert out.is_complete() and out.record() == {"stage": stage}


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
