"""Proposed labels: consistent combinations, a confidence, and the agreement the card states."""

import numpy as np
import pandas as pd
import pytest

from argen.data.proposals import MEASURED, agreement_text, propose
from benchmarks.label_proposals import measure

COMBOS = [("A", "S0", "clinical"), ("C", "S3", "out_of_domain"), ("C", "S1", "para_clinical")]


def clusters(n_per=6, seed=0):
    """Three well separated clusters of unit vectors, one per label combination."""
    rng = np.random.default_rng(seed)
    centres = np.eye(8)[:3]
    vectors = np.concatenate([c + rng.normal(0, 0.05, (n_per, 8)) for c in centres])
    labels = pd.DataFrame(
        [combo for combo in COMBOS for _ in range(n_per)], columns=["tier", "scope", "category"]
    )
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True), labels, centres


def test_each_query_gets_its_clusters_labels_and_a_confidence():
    vectors, labels, centres = clusters()
    proposed = propose(centres, vectors, labels)
    assert [tuple(row) for row in proposed[["tier", "scope", "category"]].to_numpy()] == COMBOS
    assert proposed["confidence"].between(0.5, 1).all()
    again = propose(centres, vectors, labels)
    assert again.equals(proposed)  # deterministic


def test_only_combinations_the_examples_hold_are_proposed():
    vectors, labels, _ = clusters()
    between = np.ones((1, 8)) / np.sqrt(8)  # near no cluster: fields alone would mix them
    proposed = propose(between, vectors, labels)
    assert tuple(proposed.iloc[0][["tier", "scope", "category"]]) in COMBOS
    assert proposed["confidence"].iloc[0] < 0.9


def test_a_label_with_one_value_in_the_examples_is_proposed_with_certainty():
    vectors, labels, centres = clusters()
    labels["tier"] = "B"
    proposed = propose(centres, vectors, labels)
    assert (proposed["tier"] == "B").all()


def test_the_card_quotes_the_measured_figures():
    text = agreement_text()
    for split, figures in MEASURED.items():
        assert f"{split} split ({figures['n']} prompts)" in text
        assert f"category {figures['category']:.0%}" in text


@pytest.mark.slow
def test_the_stated_agreement_is_what_the_benchmark_measures():
    assert measure() == MEASURED
