import math

import pytest

from argen.training.validation import objective


def test_objective_is_combined_less_the_weighted_gaming_rates():
    record = {"combined": 0.7, "refers_tier_c": 0.5, "deflects_clinical": 0.2}
    penalties = {"refers_tier_c": 0.2, "deflects_clinical": 0.5}
    assert objective(record, penalties) == pytest.approx(0.7 - 0.1 - 0.1)
    assert objective(record, {}) == 0.7


def test_a_rate_with_no_rows_costs_nothing():
    record = {"combined": 0.6, "refers_tier_c": math.nan}
    assert objective(record, {"refers_tier_c": 1.0}) == 0.6
