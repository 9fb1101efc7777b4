"""Reading a results file back: every judged value is checked against the rubric's ranges.

A results parquet is evaluation's output and the report's input; between the two it may be
edited or damaged. The report believes nothing it has not checked: a score outside [0, 1], a
score stored as text, a verdict that is not true or false, or a choice the rubric does not know
is an error naming the file and the column, never a number in a report.
"""

from pathlib import Path

import pandas as pd
from pandas.api import types

from argen.data.schema import (
    GENERATION_COLUMNS,
    JUDGE_COLUMNS,
    SCENARIO_COLUMNS,
    SCOPES,
    TIERS,
)
from argen.errors import ArgenError, short
from argen.judging import rubric

RESULT_COLUMNS = (
    *SCENARIO_COLUMNS,
    *GENERATION_COLUMNS,
    *rubric.RAW_FIELDS,
    *rubric.SCORE_FIELDS,
    *JUDGE_COLUMNS,
)
"""A results file's columns, in order: what evaluation and `argen judge` both write."""

SCORE_COLUMNS = (
    *rubric.UNIT_FIELDS,
    "ahimsa",
    "ahimsa_referral_factor",
    "dharma",
    "dharma_scope_factor",
    "helpfulness",
    "combined",
)
"""Numbers in [0, 1] where the judgement succeeded (NaN where it failed)."""
VERDICT_COLUMNS = (*rubric.FLAG_FIELDS, *(f"{d}_violation" for d in rubric.DIMENSIONS))
"""True or false where the judgement succeeded (missing where it failed)."""
CHOICE_COLUMNS = {**rubric.CHOICE_FIELDS, "tier": TIERS, "scope": SCOPES}


def results_frame(answered: pd.DataFrame, judged: list[dict]) -> pd.DataFrame:
    """The results table: each answered row (scenario and generation columns) beside its
    judgement (`argen.judging.base.score_items` rows, in the same order), in `RESULT_COLUMNS`."""
    judgements = pd.DataFrame(judged).drop(columns=["id"])
    results = pd.concat([answered.reset_index(drop=True), judgements], axis=1)
    return results[list(RESULT_COLUMNS)]


def read_results(path: Path) -> pd.DataFrame:
    """A results parquet, checked (`check_results`); an unreadable one is an `ArgenError`."""
    if not path.is_file():
        raise ArgenError(f"results file {path} does not exist")
    try:
        frame = pd.read_parquet(path)
    except Exception as exc:  # pyarrow raises several types for damaged files
        raise ArgenError(f"results file {path} is not a readable parquet file: {exc}") from None
    check_results(frame, path)
    return frame


def check_results(frame: pd.DataFrame, path: Path) -> None:
    """Fail with `ArgenError` naming `path` and the column unless every value is in range."""
    if "judge_ok" in frame:
        ok = frame["judge_ok"]
        if not types.is_bool_dtype(ok):
            _fail(path, "judge_ok", "is not true/false", ok)
    else:
        ok = pd.Series(True, index=frame.index)
    judged = frame[ok.astype(bool)]
    for column in SCORE_COLUMNS:
        if column not in frame:
            continue
        values = frame[column]
        if not types.is_numeric_dtype(values) or types.is_bool_dtype(values):
            _fail(path, column, f"is not numeric (stored as {values.dtype})", values)
        bad = judged[column].isna() | ~judged[column].between(0.0, 1.0)
        if bad.any():
            _fail(path, column, "has a value outside [0, 1] in a judged row", judged[column][bad])
    for column in VERDICT_COLUMNS:
        if column in frame:
            bad = ~judged[column].map(lambda v: type(v).__name__ in ("bool", "bool_"))
            if bad.any():
                _fail(path, column, "is not true or false in a judged row", judged[column][bad])
    for column, choices in CHOICE_COLUMNS.items():
        if column in frame:
            rows = judged if column in rubric.CHOICE_FIELDS else frame
            bad = ~rows[column].isin(choices)
            if bad.any():
                _fail(path, column, f"is not one of {', '.join(choices)}", rows[column][bad])


def _fail(path: Path, column: str, problem: str, values: pd.Series) -> None:
    first = values.iloc[0]
    first = first.item() if hasattr(first, "item") else first  # a numpy scalar as plain Python
    raise ArgenError(
        f"results file {path}: column {column!r} {problem} (e.g. {short(first)}); "
        "the file was edited or damaged: evaluate again"
    )
