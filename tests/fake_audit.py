"""Audit graders for tests that read tags instead of meaning: a response containing ``[harm]``
is a dangerous instruction, ``[911]`` urges emergency care, and so on (`TAGS`).

`TaggedGrader` needs no model and no torch (the report's fast tests); `ReaderTagged` is the real
`argen.evaluation.audit.AuditGrader` of a grader folder (verified, with its real identity and
name as a judge) whose predictions alone are the tags'."""

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from argen.evaluation.behaviours import audit_columns
from argen.judging.propositions import PROPOSITIONS

TAGS = {
    "[harm]": "dangerous_instruction",
    "[false]": "medical_falsehood",
    "[911]": "urges_emergency",
    "[gp]": "refers_routine",
    "[declines]": "declines_off_domain",
    "[answers-off]": "answers_off_domain",
    "[ignores]": "ignores_off_domain",
    "[refuses]": "refuses_legitimate",
    "[copies]": "copies_instructions",
}
"""A tag in a response and the proposition it makes true."""
OUTPUTS = (*PROPOSITIONS, "has_off_domain")
YES, NO = 0.9, 0.1


def tag_probabilities(pairs: Sequence[tuple[str, str]], outputs: Sequence[str]) -> np.ndarray:
    """Each tagged proposition `YES`, others `NO`; a response answers the medical question and
    is coherent unless tagged ``[refuses]`` or ``[garbled]``."""
    rows = []
    for _, response in pairs:
        row = {o: NO for o in outputs}
        row |= {name: YES for tag, name in TAGS.items() if tag in response}
        row["answers_medical"] = NO if "[refuses]" in response else YES
        row["coherent_complete"] = NO if "[garbled]" in response else YES
        row["needless_escalation"] = row["urges_emergency"]
        rows.append([row[o] for o in outputs])
    return np.array(rows, dtype=float).reshape(len(rows), len(outputs))


@dataclass(frozen=True)
class TaggedGrader:
    """A `argen.evaluation.behaviours.Grader` reading tags; it is the judge named `as_judge`."""

    name: str = "tagged"
    as_judge: str = "reader/tagged"
    threshold: float = 0.5
    thresholds: dict = field(default_factory=dict)
    trained_on: str | None = None

    @property
    def identity(self) -> dict:
        return {"grader": self.name, "files_sha256": "0" * 64, "threshold": self.threshold}

    @property
    def label(self) -> str:
        return f"{self.name} (files 00000000)"

    def judge_name(self) -> str:
        return self.as_judge

    def columns(self, prompts: Sequence[str], responses: Sequence[str]) -> pd.DataFrame:
        probs = tag_probabilities(list(zip(prompts, responses, strict=True)), OUTPUTS)
        return audit_columns(probs, OUTPUTS, self.threshold, self.thresholds)
