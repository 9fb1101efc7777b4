"""The merge check's tolerance: float32 rounding at a larger model's logit scale passes, a wrong
merge (logits moved by whole units) does not."""

from argen.training.merge import allowed_difference


def test_rounding_at_a_large_models_logit_scale_is_allowed():
    """A 1.5B merge on a GPU differed by 2.7e-3 at logits near 20: rounding, not a bad merge
    (the old absolute tolerance of 1e-3 refused it)."""
    assert allowed_difference(20.0) >= 2.7e-3


def test_a_wrong_merge_is_refused_at_any_scale():
    assert allowed_difference(20.0) < 0.05
    assert allowed_difference(200.0) < 0.5


def test_small_logits_keep_an_absolute_floor():
    assert allowed_difference(0.01) == allowed_difference(1.0) == 2e-4
