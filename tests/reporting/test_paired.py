"""Holm's adjustment of a family of p-values (statsmodels' numbers, without its garbage
collection on every call) and the paired change's Newcombe interval."""

import gc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import confint_proportions_2indep

from argen.reporting.paired import holm_adjust, paired_change_interval, paired_table

PVALUE = st.one_of(st.floats(0, 1), st.sampled_from([0.0, 0.01, 0.05, 0.5, 1.0, float("nan")]))


@settings(max_examples=200, deadline=None)
@given(pvalues=st.lists(PVALUE, max_size=30))
def test_the_numbers_are_statsmodels_holm_to_the_bit(pvalues):
    values = np.array(pvalues, dtype=float)
    tested = ~np.isnan(values)
    expected = np.full_like(values, np.nan)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gc, "collect", lambda *_: 0)  # statsmodels' own, skipped to stay quick
        if tested.any():
            expected[tested] = multipletests(values[tested], method="holm")[1]
    assert np.array_equal(holm_adjust(values), expected, equal_nan=True)


def test_no_garbage_collection_runs(monkeypatch):
    """statsmodels' Holm collects garbage on every call: a quarter of a second beside torch."""
    collected = []
    monkeypatch.setattr(gc, "collect", lambda *args: collected.append(args))
    adjusted = holm_adjust(np.array([0.01, 0.04, np.nan, 0.2]))
    assert collected == []
    assert np.allclose(adjusted, [0.03, 0.08, np.nan, 0.2], equal_nan=True)


CELL = st.integers(0, 40)


@settings(max_examples=300, deadline=None)
@given(a=CELL, b=CELL, c=CELL, d=CELL)
def test_the_change_interval_holds_the_change_and_stays_in_bounds(a, b, c, d):
    change, low, high = paired_change_interval([[a, b], [c, d]])
    n = a + b + c + d
    if not n:
        assert np.isnan([change, low, high]).all()
        return
    assert change == pytest.approx((c - b) / n)
    assert -1 <= low <= change <= high <= 1


def test_uncorrelated_flags_give_newcombes_unpaired_interval():
    """With phi zero (a*d - b*c within n/2) the paired interval is Newcombe's square-and-add of
    the two Wilson intervals, which statsmodels computes for independent samples."""
    table = [[3, 9], [17, 51]]  # a*d - b*c = 0
    change, low, high = paired_change_interval(table)
    n = 80
    expected = confint_proportions_2indep(20, n, 12, n, compare="diff", method="newcomb")
    assert (low, high) == pytest.approx(expected, abs=1e-12)
    assert change == pytest.approx(8 / 80)


def test_correlated_pairs_narrow_the_interval():
    """Twenty prompts that changed one way, none the other: beyond noise; the same change among
    prompts whose flags agree far more than chance gives a narrower interval than without."""
    rising = paired_table(np.array([False] * 20 + [True] * 10), np.array([True] * 30))
    change, low, _ = paired_change_interval(rising)
    assert change == pytest.approx(20 / 30) and low > 0
    agree = [[30, 2], [12, 56]]
    independent = [[4, 28], [38, 30]]  # same margins, flags unrelated
    width = [np.subtract(*paired_change_interval(t)[:0:-1]) for t in (agree, independent)]
    assert paired_change_interval(agree)[0] == pytest.approx(paired_change_interval(independent)[0])
    assert width[0] < width[1]
