"""The pipeline's one definition (`argen.stages.run_pipeline`): the order of the stages and what
each is handed, whichever runner (this process, or a Prefect flow's) runs them."""

from pathlib import Path

from argen.config import load_config
from argen.stages import run_pipeline


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
