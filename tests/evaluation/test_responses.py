"""Reading answers a team already has: every format, and bad input named by file, row and
column before any judge loads."""

import pandas as pd
import pytest

from argen.data.schema import SCENARIO_COLUMNS
from argen.errors import ArgenError
from argen.evaluation.responses import UNKNOWN_CATEGORY, prompt_id, read_responses
from tests.conftest import write_jsonl

ROWS = [
    {"id": "k1", "prompt": "My knee hurts.", "response": "Rest it.", "tier": "C", "scope": "S0"},
    {"id": "k2", "prompt": "Chest pain to the jaw.", "response": "Call 112.", "tier": "A"},
    {"id": "k3", "prompt": "Knee and stocks?", "response": "", "tier": "c", "scope": "s0"},
]
"""The second row names no scope; the third gives an empty answer and lowercase choices."""


def write(path, rows):
    """`rows` as the file `path`'s suffix says."""
    if path.suffix == ".jsonl":
        return write_jsonl(path, rows)
    frame = pd.DataFrame(rows)
    if path.suffix == ".csv":
        frame.to_csv(path, index=False)
    else:
        frame.to_parquet(path)
    return path


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_each_format_reads_into_the_same_answered_rows(tmp_path, suffix):
    read = read_responses(write(tmp_path / f"answers{suffix}", ROWS), scope="S1")
    frame = read.frame
    assert list(frame.columns) == [*SCENARIO_COLUMNS, "response"]
    assert frame["id"].tolist() == ["k1", "k2", "k3"]
    assert frame["tier"].tolist() == ["C", "A", "C"]
    assert frame["scope"].tolist() == ["S0", "S1", "S0"]  # the second took --scope
    assert frame["response"].tolist() == ["Rest it.", "Call 112.", ""]  # empty: judged
    assert set(frame["category"]) == {UNKNOWN_CATEGORY}
    assert set(frame["source"]) == {f"answers{suffix}"}
    assert read.assumed == {"scope": ("S1", 1)}


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_a_missing_column_names_the_file_and_the_columns_it_has(tmp_path, suffix):
    path = write(tmp_path / f"logs{suffix}", [{"prompt": "p", "answer": "a"}])
    with pytest.raises(ArgenError, match=r"logs\S* has no 'response' column.*it has 'answer'"):
        read_responses(path, "C", "S0")


@pytest.mark.parametrize(
    ("suffix", "where"), [(".jsonl", "line 3"), (".csv", "line 4"), (".parquet", "row 3")]
)
def test_a_bad_tier_names_the_file_the_row_and_the_column(tmp_path, suffix, where):
    rows = [dict(row, scope="S0") for row in ROWS]
    rows[2]["tier"] = "D"
    path = write(tmp_path / f"answers{suffix}", rows)
    with pytest.raises(ArgenError) as caught:
        read_responses(path)
    assert f"{path} {where}: column 'tier' is 'D', not one of A, B, C" in str(caught.value)


def test_every_problem_is_listed_in_one_message(tmp_path):
    rows = [
        {"id": "a", "prompt": "  ", "response": "x", "tier": "C", "scope": "S0"},
        {"id": "b", "prompt": "p", "response": None, "tier": "C", "scope": "S9"},
        {"id": "a", "prompt": 7, "response": "x", "tier": "C", "scope": "S0", "category": "x"},
    ]
    with pytest.raises(ArgenError) as caught:
        read_responses(write_jsonl(tmp_path / "bad.jsonl", rows))
    message = str(caught.value)
    assert "6 problem(s)" in message
    for expected in (
        "line 1: column 'prompt' is missing or empty",
        "line 2: column 'response' is missing",
        "line 2: column 'scope' is 'S9', not one of S0, S1, S2, S3",
        "line 3: column 'prompt' must be text, got int 7",
        "line 3: column 'category' is 'x', not one of clinical",
        "line 3: duplicate id 'a' (first at line 1)",
    ):
        assert expected in message


def test_rows_without_a_tier_are_an_error_unless_the_command_names_one(tmp_path):
    rows = [{"prompt": f"question {i}?", "response": "answer", "scope": "S0"} for i in range(3)]
    rows[1]["tier"] = "B"
    path = write_jsonl(tmp_path / "logs.jsonl", rows)
    with pytest.raises(ArgenError, match=r"2 row\(s\) have no tier \(line 1, line 3\).*--tier"):
        read_responses(path)
    read = read_responses(path, tier="C")
    assert read.frame["tier"].tolist() == ["C", "B", "C"]
    assert read.assumed == {"tier": ("C", 2)}


def test_without_an_id_column_rows_pair_by_prompt(tmp_path):
    rows = [
        {"prompt": "My knee hurts.", "response": "a"},
        {"prompt": "  My knee\n hurts. ", "response": "b"},
        {"prompt": "A cough.", "response": "c"},
    ]
    frame = read_responses(write_jsonl(tmp_path / "logs.jsonl", rows), "C", "S0").frame
    knee = prompt_id("My knee hurts.")
    assert frame["id"].tolist() == [knee, f"{knee}#2", prompt_id("A cough.")]
    assert knee.startswith("p-") and len(knee) == 14


def test_a_numeric_id_column_is_read_as_text(tmp_path):
    rows = [{"id": 7, "prompt": "p", "response": "r", "tier": "C", "scope": "S0"}]
    assert read_responses(write(tmp_path / "a.parquet", rows)).frame["id"].tolist() == ["7"]


@pytest.mark.parametrize(
    ("name", "content", "problem"),
    [
        ("none.jsonl", None, "does not exist"),
        ("notes.txt", "hello", "unknown format '.txt'"),
        ("empty.csv", "", "file is empty"),
        ("broken.jsonl", '{"prompt": "p"\n', "line 1: not valid JSON"),
    ],
)
def test_an_unreadable_file_is_named(tmp_path, name, content, problem):
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    with pytest.raises(ArgenError, match=problem):
        read_responses(path, "C", "S0")


def test_a_default_outside_the_choices_is_refused(tmp_path):
    with pytest.raises(ArgenError, match="--tier 'D': expected one of A, B, C"):
        read_responses(tmp_path / "x.jsonl", tier="D")
