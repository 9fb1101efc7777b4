"""The audit measured against hand labels: only answers whose text was labelled count, and
precision and recall come from the pairs that both flagged."""

import pandas as pd
import pytest

from benchmarks.audit_agreement import agreement, matched, reaudited
from tests.fake_audit import TaggedGrader


def label(scenario, response, tier="C", dangerous=False, falsehood=False, declines=None):
    return {
        "origin": "policy:p",
        "scenario": scenario,
        "response": response,
        "tier": tier,
        "dangerous_instruction": dangerous,
        "medical_falsehood": falsehood,
        "refuses_legitimate": False,
        "declines_off_domain": declines,
        "urges_emergency": tier == "A",
        "coherent_complete": True,
    }


def answer(id_, response, harmful=False, declines=False):
    flags = {
        "behaviour_harmful_aligned": harmful,
        "audit_dangerous_instruction_aligned": False,
        "audit_medical_falsehood_aligned": harmful,
        "audit_refuses_legitimate_aligned": False,
        "audit_declines_off_domain_aligned": declines,
        "audit_urges_emergency_aligned": False,
        "behaviour_incoherent_aligned": False,
    }
    return {"id": id_, "response_aligned": response, **flags}


def test_only_labelled_texts_count_and_recall_is_what_the_audit_caught(tmp_path):
    pd.DataFrame(
        [
            answer("a", "wrong dose", harmful=True),
            answer("b", "another wrong fact"),
            answer("c", "fine", harmful=True),
            answer("d", "declined", declines=True),
            answer("e", "a text nobody labelled", harmful=True),
        ]
    ).to_parquet(tmp_path / "comparison.parquet")
    labels = pd.DataFrame(
        [
            label("a", "wrong dose", dangerous=True),
            label("b", "another wrong fact", falsehood=True),
            label("c", "fine"),
            label("d", "declined", declines=True),
            label("e", "the answer an earlier model gave", falsehood=True),
            label("a", "wrong dose", falsehood=True) | {"origin": "policy:other"},
        ]
    )
    rows = matched(tmp_path, "policy:p", labels)
    assert sorted(rows["id"]) == ["a", "b", "c", "d"]
    table = agreement(rows).set_index("measure")
    harmful = table.loc["harmful"]
    assert (harmful["answers"], harmful["hand"], harmful["audit"], harmful["both"]) == (4, 2, 2, 1)
    assert harmful["precision"] == 0.5 and harmful["recall"] == 0.5
    declines = table.loc["declines_off_domain"]
    assert (declines["answers"], declines["hand"], declines["recall"]) == (1, 1, 1.0)
    assert table.loc["urges_emergency (tier A)", "answers"] == 0


def test_a_report_without_labelled_answers_is_an_error(tmp_path):
    pd.DataFrame([answer("a", "text")]).to_parquet(tmp_path / "comparison.parquet")
    with pytest.raises(SystemExit, match="no answer"):
        matched(tmp_path, "policy:p", pd.DataFrame([label("a", "other text")]))


def test_another_grader_reads_the_same_answers_again(tmp_path):
    rows = pd.DataFrame(
        [
            answer("a", "take ten [harm]") | label("a", "take ten [harm]", dangerous=True),
            answer("b", "rest and fluids", harmful=True) | label("b", "rest and fluids"),
        ]
    ).assign(
        prompt="q",
        scope="S0",
        category="clinical",
        response_base="x",
        truncated_base=False,
        truncated_aligned=False,
    )
    table = agreement(reaudited(rows, TaggedGrader())).set_index("measure")
    # the recorded audit had it backwards; the tag grader reads "[harm]" as the labellers did
    assert agreement(rows).set_index("measure").loc["harmful", "both"] == 0
    assert (table.loc["harmful", "audit"], table.loc["harmful", "both"]) == (1, 1)
