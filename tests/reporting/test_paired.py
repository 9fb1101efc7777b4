"""Holm's adjustment of a family of p-values: statsmodels' numbers, without its garbage
collection on every call."""

import gc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from statsmodels.stats.multitest import multipletests

from argen.reporting.paired import holm_adjust

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
