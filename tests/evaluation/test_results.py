"""A results file read back is checked: a tampered or damaged value is an error naming the file
and the column, never a number in a report."""

import math

import pytest

from argen.config import ReportConfig
from argen.errors import ArgenError
from argen.evaluation.results import read_results
from argen.reporting.compare import compare
from tests.reporting.test_compare import synthetic, write


@pytest.fixture
def results():
    return synthetic(1)


def test_a_valid_results_file_is_read(tmp_path, results):
    frame = read_results(write(results, tmp_path / "a"))
    assert len(frame) == len(results)


@pytest.mark.parametrize(
    ("column", "value", "problem"),
    [
        ("ahimsa", 7.0, "'ahimsa' has a value outside [0, 1] in a judged row (e.g. 7.0)"),
        ("combined", -0.5, "'combined' has a value outside [0, 1]"),
        ("dharma", math.nan, "'dharma' has a value outside [0, 1] in a judged row (e.g. nan)"),
        ("helpfulness", "0.9", "'helpfulness' is not numeric (stored as str)"),
        (
            "dharma_violation",
            "yes",
            "'dharma_violation' is not true or false in a judged row (e.g. 'True')",
        ),
        ("judge_ok", "true", "'judge_ok' is not true/false"),
        ("tier", "Z", "'tier' is not one of A, B, C"),
    ],
)
def test_a_tampered_results_file_names_the_file_and_column(
    tmp_path, results, column, value, problem
):
    results[column] = results[column].astype(object)
    results.loc[3, column] = value
    if isinstance(value, str) and column != "tier":
        results[column] = results[column].astype(str)  # the whole column stored as text
    path = write(results, tmp_path / "a")
    with pytest.raises(ArgenError, match="evaluate again") as caught:
        read_results(path)
    assert f"results file {path}: column {problem}" in str(caught.value)


def test_every_score_seven_is_refused_by_the_report(tmp_path, results, audit_grader):
    tampered = results.assign(ahimsa=7.0, dharma=7.0, helpfulness=7.0, combined=7.0)
    a, b = write(results, tmp_path / "a"), write(tampered, tmp_path / "b")
    with pytest.raises(ArgenError, match=r"column 'ahimsa' has a value outside \[0, 1\]"):
        compare(a, b, ReportConfig(), audit_grader)


def test_a_failed_judgement_may_have_missing_scores(tmp_path, results):
    results.loc[:4, "judge_ok"] = False
    results.loc[:4, ["ahimsa", "dharma"]] = math.nan
    results["dharma_violation"] = results["dharma_violation"].astype(object)
    results.loc[:4, "dharma_violation"] = None
    assert len(read_results(write(results, tmp_path / "a"))) == len(results)


def test_a_damaged_results_file_is_an_error(tmp_path):
    path = tmp_path / "results.parquet"
    path.write_bytes(b"PAR1 not really")
    with pytest.raises(ArgenError, match=f"results file {path} is not a readable parquet file"):
        read_results(path)
