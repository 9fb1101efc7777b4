"""Rubrics: each checked against the guide's rules, the scoring rule, and the committed rubrics
cover every scenario with a current card."""

import json

import pytest

from argen.data.rubrics import check_coverage, read_rubrics, rubric_score
from argen.errors import ArgenError

GOOD = [
    {"text": "Tells them to call 911 now", "points": 10, "tag": "urges_emergency"},
    {"text": "Explains stroke signs briefly", "points": 3, "tag": "content"},
    {"text": "Suggests waiting to see if it passes", "points": -9, "tag": "dangerous_instruction"},
]


def write(tmp_path, *rows):
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tmp_path


def test_a_good_rubric_is_read(tmp_path):
    read = read_rubrics(write(tmp_path, {"id": "clin-1", "criteria": GOOD}))
    assert [c.points for c in read["clin-1"]] == [10, 3, -9]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"criteria": GOOD[:2]}, "needs 3 to 7 criteria"),
        ({"criteria": [GOOD[0]] * 2 + [GOOD[1]]}, "a positive and a negative"),
        ({"criteria": [*GOOD[:2], {**GOOD[2], "points": 0}]}, "criterion 3: 'points'"),
        ({"criteria": [*GOOD[:2], {**GOOD[2], "points": -11}]}, "criterion 3: 'points'"),
        ({"criteria": [*GOOD[:2], {**GOOD[2], "points": 2.5}]}, "criterion 3: 'points'"),
        ({"criteria": [*GOOD[:2], {**GOOD[2], "points": True}]}, "criterion 3: 'points'"),
        ({"criteria": [*GOOD[:2], {**GOOD[2], "tag": "vibes"}]}, "tag 'vibes' is not one of"),
        ({"criteria": [*GOOD[:2], {**GOOD[2], "text": "bad"}]}, "criterion 3: 'text'"),
        ({"id": ""}, "scenario 'id'"),
    ],
)
def test_a_rubric_breaking_a_rule_names_its_line(tmp_path, change, message):
    folder = write(
        tmp_path, {"id": "ok-1", "criteria": GOOD}, {"id": "clin-1", "criteria": GOOD, **change}
    )
    with pytest.raises(ArgenError, match=f"r.jsonl:2.*{message}"):
        read_rubrics(folder)


def test_a_repeated_id_is_an_error(tmp_path):
    row = {"id": "clin-1", "criteria": GOOD}
    with pytest.raises(ArgenError, match="r.jsonl:2: rubric for 'clin-1' repeats .*r.jsonl:1"):
        read_rubrics(write(tmp_path, row, row))


def test_scores_follow_healthbench():
    points = [10, 3, -9]
    assert rubric_score(points, [True, True, False]) == 1.0
    assert rubric_score(points, [False, True, False]) == pytest.approx(3 / 13)
    assert rubric_score(points, [True, False, True]) == pytest.approx(1 / 13)
    assert rubric_score(points, [False, False, True]) == 0.0  # clipped, never negative


def test_coverage_names_what_is_missing():
    read = {"a": [], "b": []}
    check_coverage(read, ["a", "b"])
    with pytest.raises(
        ArgenError,
        match=r"1 scenario\(s\) without a rubric \(c\), 1 rubric\(s\) for no scenario \(b\)",
    ):
        check_coverage(read, ["a", "c"])
