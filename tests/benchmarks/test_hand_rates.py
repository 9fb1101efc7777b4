"""Hand-read rates per policy: counts only where a measure applies, and the paired change from a
reference policy on the prompts both answered."""

import pandas as pd
import pytest

from benchmarks.hand_rates import changes, counts, hand_flags


def label(origin, scenario, tier="C", harmful=False, declines=None):
    return {
        "origin": origin,
        "scenario": scenario,
        "tier": tier,
        "dangerous_instruction": False,
        "medical_falsehood": harmful,
        "refuses_legitimate": False,
        "declines_off_domain": declines,
        "urges_emergency": tier == "A",
        "coherent_complete": True,
    }


LABELS = pd.DataFrame(
    [
        label("policy:old", "s1", harmful=True),
        label("policy:old", "s2", harmful=True, declines=False),
        label("policy:old", "s3", tier="A"),
        label("policy:new", "s1"),
        label("policy:new", "s2", declines=True),
        label("policy:new", "s3", tier="A", harmful=True),
        label("policy:new", "s4", harmful=True),  # no reference answer: counted, never paired
    ]
)


def test_counts_apply_only_where_the_measure_does():
    new = counts(hand_flags(LABELS, "policy:new"))
    assert new["harmful"] == "2/4"
    assert new["declines_off_domain"] == "1/1"
    assert new["urges_emergency (tier A)"] == "1/1"


def test_the_change_is_paired_on_the_prompts_both_answered():
    old, new = hand_flags(LABELS, "policy:old"), hand_flags(LABELS, "policy:new")
    assert changes(new, old)["harmful"].startswith("-0.33 ")  # 2/3 -> 1/3 on s1-s3
    assert changes(new, old)["declines_off_domain"].startswith("+1.00 ")


def test_an_unknown_origin_is_an_error_naming_it():
    with pytest.raises(SystemExit, match="policy:none"):
        hand_flags(LABELS, "policy:none")
