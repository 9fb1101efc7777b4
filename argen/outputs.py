"""What each stage's output directory holds: the one place where artifact file names live.

Each stage writes one directory (atomically, under its content key) and, last, its sidecar: a
JSON record of what it did, whose presence marks the output complete. A stage that makes data or
a model (curate, train, merge) records its provenance in `manifest.json`; a stage that measures
(evaluate, report) records its figures in `summary.json`. Code reads a stage's files through
these classes, never through a file name of its own.
"""

import json
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

MANIFEST = "manifest.json"
SUMMARY = "summary.json"


@dataclass(frozen=True)
class StageOutput:
    """A stage's output directory."""

    path: Path
    SIDECAR: ClassVar[str] = MANIFEST

    def __post_init__(self):
        object.__setattr__(self, "path", Path(self.path))

    @property
    def sidecar(self) -> Path:
        return self.path / self.SIDECAR

    def is_complete(self) -> bool:
        return self.sidecar.is_file()

    def record(self) -> dict:
        """The sidecar's record."""
        return json.loads(self.sidecar.read_text())


class CuratedSplits(StageOutput):
    """Curation: the three splits, the data card, the near-duplicates and the rejects."""

    @staticmethod
    def split_name(split: str) -> str:
        return f"{split}.parquet"

    def split(self, split: str) -> Path:
        return self.path / self.split_name(split)

    @property
    def train(self) -> Path:
        return self.split("train")

    @property
    def validation(self) -> Path:
        return self.split("validation")

    @property
    def test(self) -> Path:
        return self.split("test")

    DUPLICATES: ClassVar[str] = "duplicates.parquet"
    REJECTS: ClassVar[str] = "rejects.parquet"
    DATACARD: ClassVar[str] = "datacard.md"


class Evaluation(StageOutput):
    """An evaluation: one row per scenario, and its summary (settings, means, rates)."""

    SIDECAR: ClassVar[str] = SUMMARY
    RESULTS: ClassVar[str] = "results.parquet"

    @property
    def results(self) -> Path:
        return self.path / self.RESULTS

    @classmethod
    def of_results(cls, results: Path) -> "Evaluation":
        """The evaluation a results file belongs to."""
        return cls(Path(results).parent)


class Adapter(StageOutput):
    """Training: the LoRA adapter (peft's files), its logs and manifest."""

    TRAINING_LOG: ClassVar[str] = "training_log.parquet"
    VALIDATION_LOG: ClassVar[str] = "validation_log.parquet"

    @property
    def training_log(self) -> Path:
        return self.path / self.TRAINING_LOG

    @property
    def validation_log(self) -> Path:
        return self.path / self.VALIDATION_LOG


class Merged(StageOutput):
    """A merged model (transformers' files) and the manifest of its merge."""


class Report(StageOutput):
    """A comparison report: markdown, self-contained HTML, plots, the paired rows, the summary."""

    SIDECAR: ClassVar[str] = SUMMARY
    MARKDOWN: ClassVar[str] = "report.md"
    HTML: ClassVar[str] = "report.html"
    COMPARISON: ClassVar[str] = "comparison.parquet"
    PLOTS: ClassVar[dict[str, str]] = {
        "means": "means.png",
        "distributions": "distributions.png",
        "category_deltas": "category_deltas.png",
        "training": "training.png",
    }

    @property
    def markdown(self) -> Path:
        return self.path / self.MARKDOWN


STAGE_OUTPUTS: dict[str, type[StageOutput]] = {
    "curate": CuratedSplits,
    "evaluate": Evaluation,
    "train": Adapter,
    "merge": Merged,
    "report": Report,
}
