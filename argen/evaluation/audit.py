"""The audit grader: a trained reading grader (`argen.judging.reader`) that reads every answer
of both models for the report, held apart from the reward judge training optimised (Goodhart: a
measure optimised against is no longer a measure). It grades (prompt, response) pairs into the
per-response columns `argen.evaluation.behaviours` reads: each output of the grader as its
probability (``audit_<name>_p``) and true or false at the configured threshold
(``audit_<name>``)."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

import numpy as np
import pandas as pd

from argen.config import AuditConfig
from argen.evaluation.behaviours import audit_columns
from argen.hashing import json_sha256
from argen.judging.reader import (
    OUTPUTS,
    PACKAGED_AUDIT,
    ReaderJudge,
    criteria_identity,
    loaded,
    read_pairs,
    verify,
)


@dataclass(frozen=True)
class AuditGrader:
    """A trained reading grader used as the audit: its folder (checked against its record), its
    record's name, the SHA-256 of its files list (its identity) and the thresholds."""

    folder: Path
    name: str
    files_sha256: str
    threshold: float = 0.5
    thresholds: Mapping[str, float] = field(default_factory=dict)
    trained_on: str | None = None  # its labels' identity (`argen.data.labels.items_sha256`)
    meta: Mapping = field(default_factory=dict, repr=False, compare=False)
    """The record `from_config` verified: its files are not hashed again on each use."""

    @classmethod
    def from_config(cls, config: AuditConfig) -> Self:
        """The configured grader (the packaged audit grader by default), its files checked."""
        folder = Path(config.grader) if config.grader is not None else PACKAGED_AUDIT
        meta = verify(folder)
        files = json_sha256(meta["files"])
        trained_on = meta.get("trained_on", {}).get("labels_sha256")
        return cls(
            folder,
            meta["name"],
            files,
            config.threshold,
            dict(config.thresholds),
            trained_on,
            meta,
        )

    @property
    def identity(self) -> dict:
        """What keys a report: the grader's name and files and the thresholds."""
        return {
            "grader": self.name,
            "files_sha256": self.files_sha256,
            **criteria_identity(self.meta),
            "threshold": self.threshold,
            "thresholds": dict(sorted(self.thresholds.items())),
        }

    @property
    def label(self) -> str:
        """``name (files 1a2b3c4d)``: how the report names the audit."""
        return f"{self.name} (files {self.files_sha256[:8]})"

    def judge_name(self) -> str:
        """The name this grader carries as a reward judge (``judge.backend: reader``), so that a
        results file or a training record judged by it can be recognised."""
        return ReaderJudge(self.folder).name

    def probabilities(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """(n, outputs) probabilities, one row per (prompt, response) pair (strengthened by the
        prompt's graded rubric where the grader has a criterion head)."""
        outputs, _, _ = read_pairs(loaded(self.folder, self.meta), list(pairs))
        return np.array([[p[name] for name in OUTPUTS] for p in outputs]).reshape(-1, len(OUTPUTS))

    def columns(self, prompts: Sequence[str], responses: Sequence[str]) -> pd.DataFrame:
        """The audit's columns for each (prompt, response): probability and verdict per output."""
        probs = self.probabilities(list(zip(prompts, responses, strict=True)))
        return audit_columns(probs, OUTPUTS, self.threshold, self.thresholds)
