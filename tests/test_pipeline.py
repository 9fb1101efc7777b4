"""The pipeline's one definition (`argen.pipeline.run_pipeline`): the order of the stages and what
each is handed, whichever runner (this process, or a Prefect flow's) runs them."""

from pathlib import Path

from argen import pipeline
from argen.config import load_config
from argen.pipeline import run_pipeline


class Recorder:
    """A runner that records each call and answers with a directory named after it."""

    def __init__(self):
        self.calls = []

    def curate(self, config):
        self.calls.append(("curate",))
        return Path("curated")

    def evaluate(self, config, model, scenarios, label):
        self.calls.append(("evaluate", model, scenarios, label))
        return Path(f"eval-{label}")

    def train_and_merge(self, config, curated):
        self.calls.append(("train_and_merge", curated))
        return Path("adapter"), Path("merged")

    def report(self, config, baseline, aligned, training_log, name):
        self.calls.append(("report", baseline, aligned, training_log, name))
        return Path("report")


def test_the_pipeline_runs_its_stages_in_order_and_hands_each_its_inputs():
    config = load_config()
    runner = Recorder()
    outputs = run_pipeline(config, "line", runner)
    assert runner.calls == [
        ("curate",),
        ("evaluate", config.model.base, Path("curated/test.parquet"), "baseline"),
        ("train_and_merge", Path("curated")),
        ("evaluate", "merged", Path("curated/test.parquet"), "aligned"),
        (
            "report",
            Path("eval-baseline/results.parquet"),
            Path("eval-aligned/results.parquet"),
            Path("adapter/training_log.parquet"),
            "line",
        ),
    ]
    assert outputs == {
        "curate": Path("curated"),
        "baseline": Path("eval-baseline"),
        "train": Path("adapter"),
        "merge": Path("merged"),
        "aligned": Path("eval-aligned"),
        "report": Path("report"),
    }


def test_a_complete_keyed_output_is_reused_and_an_incomplete_one_computed(tmp_path, monkeypatch):
    """`keyed` is the one cache: it computes into the keyed directory once, then reuses it; a
    directory without its sidecar (a stage that stopped part-way) is computed again."""
    calls = []

    def fake_curate(config, out):
        calls.append(out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "manifest.json").write_text("{}")
        return out

    monkeypatch.setitem(pipeline.RUNNERS, "curate", fake_curate)
    config = load_config("default", [f"storage.root={tmp_path}"])
    out = pipeline.curate_out(config)
    assert pipeline.keyed("curate", out, config) == (out, False)
    assert pipeline.keyed("curate", out, config) == (out, True)
    assert pipeline.run_curate(config) == out and calls == [out]
    (out / "manifest.json").unlink()
    assert pipeline.keyed("curate", out, config) == (out, False)
    assert calls == [out, out]
