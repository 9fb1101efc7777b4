"""What each stage's output directory holds: the one place where artifact file names live, and
the typed record (sidecar) each one carries.

Each stage writes one directory (atomically, under its content key) and, last, its sidecar: a
JSON record of what it did, whose presence marks the output complete. A stage that makes data or
a model (curate, train, merge) records its provenance in `manifest.json`; a stage that measures
(evaluate, report) records its figures in `summary.json`. Code reads a stage's files through
these classes, never through a file name of its own, and its record through `read` (a pydantic
model: `Record` and one subclass per stage).

`argen.pipeline.run_stage` seals every output it makes (`seal`): the record then names its stage
and schema and holds the size and SHA-256 of every other file of the output, so that `--overwrite`
replaces only an output of the same stage and a reused output is checked against it (`verify`).
A record of an older ArGen (no `schema_version`) still reads; it names no files to check.
"""

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, cast

from pydantic import BaseModel, ConfigDict, ValidationError

from argen.atomic import atomic_file
from argen.errors import ArgenError
from argen.hashing import file_sha256, json_sha256, tree_files

MANIFEST = "manifest.json"
SUMMARY = "summary.json"
SCHEMA_VERSION = 1
"""The sidecars' schema: 1 adds the stage name, this version and the output's file list."""


class _Open(BaseModel):
    """A record part that keeps the fields it does not type (a stage may record more)."""

    model_config = ConfigDict(extra="allow")


class FileRecord(BaseModel):
    """One file of an output: its size in bytes and SHA-256."""

    size: int
    sha256: str


class Record(_Open):
    """What every sidecar holds; a stage's own fields come beside these."""

    stage: str | None = None
    schema_version: int | None = None
    files: dict[str, FileRecord] | None = None
    digest: str | None = None
    """SHA-256 of the rest of the record: a record edited by hand no longer matches it."""

    def content_digest(self) -> str:
        return json_sha256(self.model_dump(mode="json", exclude={"digest"}, exclude_unset=True))


class CurateManifest(Record):
    counts: dict[str, Any] = {}


class EvaluationSummary(Record):
    label: str | None = None
    model_dir: str | None = None
    settings: dict[str, Any] = {}


class TrainManifest(Record):
    steps: int | None = None


class MergeManifest(Record):
    max_logit_difference: float | None = None


class GateResult(_Open):
    rule: str
    passed: bool
    evidence: str = ""


class Verdict(_Open):
    """A dimension's call (improved, worse, no change beyond noise) with its interval."""

    dimension: str
    call: str
    difference: float = math.nan
    ci_low: float = math.nan
    ci_high: float = math.nan


class Score(_Open):
    """A dimension's means, paired difference, interval and Holm-adjusted p (None: none)."""

    dimension: str
    baseline: float | None = None
    aligned: float | None = None
    difference: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p_holm: float | None = None


class ReportSummary(Record):
    gate_passed: bool
    verdict: list[Verdict]
    gate: list[GateResult] = []
    scores: list[Score] = []
    smoke_run: bool = False
    audit: dict[str, Any] = {}
    """Which grader audited the answers, and whether it is independent of the reward judge."""
    provenance: dict[str, Any] = {}
    """What was compared: models, adapter, config, judges, scenarios, code, seeds, hardware."""


@dataclass(frozen=True)
class StageOutput:
    """A stage's output directory."""

    path: Path
    SIDECAR: ClassVar[str] = MANIFEST
    RECORD: ClassVar[type[Record]] = Record

    def __post_init__(self):
        object.__setattr__(self, "path", Path(self.path))

    @property
    def sidecar(self) -> Path:
        return self.path / self.SIDECAR

    def is_complete(self) -> bool:
        return self.sidecar.is_file()

    def read(self) -> Record:
        """The sidecar's record, validated by this output's record type."""
        return self.RECORD.model_validate(json.loads(self.sidecar.read_text()))

    def try_read(self, as_kind: type[Record] | None = None) -> Record | None:
        """The record (read as `as_kind`, else as this output's type), or None when there is
        none or it does not parse."""
        if not self.is_complete():
            return None
        try:
            return (as_kind or self.RECORD).model_validate(json.loads(self.sidecar.read_text()))
        except (ValueError, ValidationError):
            return None

    def record(self) -> dict:
        """The sidecar's record as a dict (validated; what was written, nothing added)."""
        return self.read().model_dump(exclude_unset=True)

    def files(self) -> dict[str, Path]:
        """Every file of the output but its sidecar, by its path relative to the output."""
        return {
            p.relative_to(self.path).as_posix(): p
            for p in tree_files(self.path)
            if p != self.sidecar
        }

    def seal(self, stage: str) -> Record:
        """Rewrite the sidecar (atomically) as a typed record naming `stage`, this schema and the
        size and SHA-256 of every other file of the output."""
        files = {
            name: FileRecord(size=path.stat().st_size, sha256=file_sha256(path))
            for name, path in self.files().items()
        }
        raw = json.loads(self.sidecar.read_text())
        raw.pop("digest", None)
        sealed = {**raw, "stage": stage, "schema_version": SCHEMA_VERSION, "files": files}
        record = self.RECORD.model_validate(sealed)
        record.digest = record.content_digest()
        text = json.dumps(record.model_dump(exclude_unset=True), indent=2) + "\n"
        if text != self.sidecar.read_text():
            with atomic_file(self.sidecar) as tmp:
                tmp.write_text(text)
        return record

    def problems(self, only: str | None = None) -> list[str]:
        """What differs from the record's file list: a missing, resized or changed file (each
        named), or a file the record does not list; empty when everything matches. `only`
        checks that one file."""
        record = self.read()
        if record.digest is not None and record.digest != record.content_digest():
            return [f"{self.sidecar} was edited after it was written"]
        recorded = record.files or {}
        present = self.files()
        if only is not None:
            recorded = {k: v for k, v in recorded.items() if k == only}
            present = {k: v for k, v in present.items() if k == only}
        found = []
        for name, expected in recorded.items():
            path = present.get(name)
            if path is None:
                found.append(f"{self.path / name} is missing")
            elif path.stat().st_size != expected.size:
                found.append(f"{path} is {path.stat().st_size} bytes, not {expected.size}")
            elif file_sha256(path) != expected.sha256:
                found.append(f"{path} does not match its recorded SHA-256")
        found += [
            f"{present[name]} is not part of the output"
            for name in present.keys() - recorded.keys()
        ]
        return found

    def check_replaceable(self, stage: str) -> None:
        """Refuse (ArgenError) to replace this folder with a `stage` output unless it holds an
        earlier output of that same stage (its record names it) and nothing its record does
        not list: another stage's output, an older unnamed one or anyone's files stay."""
        if not self.is_complete():
            raise ArgenError(
                f"--out {self.path} holds files that are not an argen {stage} output "
                f"(no {self.SIDECAR}); refusing to replace them"
            )
        record = self.try_read(Record)  # whichever stage wrote it
        if record is None or record.stage != stage:
            named = record.stage if record and record.stage else None
            held = f"an argen {named} output" if named else "files"
            raise ArgenError(
                f"--out {self.path} holds {held}, not an argen {stage} output ({self.SIDECAR} "
                f"names {named or 'no stage'}); refusing to replace it"
            )
        unlisted = sorted(set(self.files()) - set(record.files or self.files()))
        if unlisted:
            raise ArgenError(
                f"--out {self.path} holds files its {stage} record does not list "
                f"({', '.join(unlisted)}); refusing to replace them"
            )


class CuratedSplits(StageOutput):
    """Curation: the three splits, the data card, the near-duplicates, the rejects and the
    proposed labels to review."""

    RECORD: ClassVar[type[Record]] = CurateManifest

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
    REVIEW: ClassVar[str] = "review.csv"
    """The rows whose labels curation proposed, for a person to check and feed back."""
    DATACARD: ClassVar[str] = "datacard.md"


class Evaluation(StageOutput):
    """An evaluation: one row per scenario, and its summary (settings, means, rates)."""

    SIDECAR: ClassVar[str] = SUMMARY
    RECORD: ClassVar[type[Record]] = EvaluationSummary
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

    RECORD: ClassVar[type[Record]] = TrainManifest

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

    RECORD: ClassVar[type[Record]] = MergeManifest


class Report(StageOutput):
    """A comparison report: markdown, self-contained HTML, the reading sheet, plots, the paired
    rows, the summary. (The sheet is not ``reading.md``: a hand-written ``READING.md`` beside a
    published report would be the same file on a case-insensitive filesystem.)"""

    SIDECAR: ClassVar[str] = SUMMARY
    RECORD: ClassVar[type[Record]] = ReportSummary
    MARKDOWN: ClassVar[str] = "report.md"
    HTML: ClassVar[str] = "report.html"
    READING_SHEET: ClassVar[str] = "reading-sheet.md"
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

    @property
    def reading_sheet(self) -> Path:
        return self.path / self.READING_SHEET

    def summary(self) -> ReportSummary:
        """The report's typed summary: its verdict, gate and scores."""
        return cast(ReportSummary, self.read())


class _Summary(StageOutput):
    """Any stage's output whose sidecar is a summary, read as a plain record."""

    SIDECAR: ClassVar[str] = SUMMARY


def sealed(folder: Path) -> StageOutput | None:
    """The stage output `folder` holds, if a stage sealed it (its record lists its files)."""
    for output in (StageOutput(folder), _Summary(folder)):
        record = output.try_read()
        if record and record.stage and record.files is not None:
            return output
    return None


def check_inputs(inputs: dict[str, Any]) -> None:
    """Refuse an input that is (or is in) a stage's output whose files no longer match its
    record: the message names the file. Inputs from elsewhere are taken as they are."""
    for name, value in inputs.items():
        if not isinstance(value, Path) or not value.exists():
            continue
        output = sealed(value if value.is_dir() else value.parent)
        if output is None:
            continue
        problems = output.problems(None if value.is_dir() else value.name)
        if problems:
            raise ArgenError(
                f"{name}: {problems[0]}, changed since its {output.read().stage} stage wrote it; "
                "run that stage again (or restore the file)"
            )
