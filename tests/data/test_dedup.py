"""Near duplicates in bounded memory give the same answer as the dense n x n computation."""

import json
import tracemalloc

import numpy as np
import pytest
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from argen.config import CurateConfig
from argen.data.curate import curate_frames
from argen.data.dedup import near_duplicates
from tests.conftest import scenario


def dense_reference(vectors, threshold, related_threshold):
    """The earlier implementation: a full similarity matrix, a greedy pass, then components."""
    similarity = vectors @ vectors.T
    kept, duplicate_of, best_similarity = [], {}, {}
    for i in range(len(vectors)):
        if kept:
            best = int(np.argmax(similarity[i, kept]))
            if similarity[i, kept[best]] >= threshold:
                duplicate_of[i] = kept[best]
                best_similarity[i] = float(similarity[i, kept[best]])
                continue
        kept.append(i)
    adjacency = csr_matrix(similarity[np.ix_(kept, kept)] >= related_threshold)
    groups = connected_components(adjacency, directed=False)[1]
    return duplicate_of, best_similarity, groups


def assert_same_as_dense(vectors, threshold, related_threshold, block):
    duplicate_of, similarity, groups = dense_reference(vectors, threshold, related_threshold)
    found = near_duplicates(vectors, threshold, related_threshold, block=block)
    dropped = np.flatnonzero(found.duplicate_of >= 0)
    assert {int(i): int(found.duplicate_of[i]) for i in dropped} == duplicate_of
    # float32 sums split into other blocks differ in the last bits: compare within a tolerance,
    # never after rounding (0.93635 rounds to 0.9363 or 0.9364 depending on the split)
    found_similarity = {int(i): float(found.similarity[i]) for i in dropped}
    assert found_similarity == pytest.approx(similarity, abs=1e-5)
    assert found.groups.tolist() == groups.tolist()
    return found


def clustered_vectors(n, dim=384, centres=40, seed=0):
    """Unit vectors around a few centres at varied distances: many near duplicates, chains of
    related prompts, and singletons, in shuffled order."""
    rng = np.random.default_rng(seed)

    def unit(rows):
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)

    centre = unit(rng.standard_normal((centres, dim)))[rng.integers(0, centres, n)]
    cosine = rng.uniform(0.86, 0.999, size=(n, 1))  # to the centre; pairs span about 0.74..1
    vectors = centre + np.sqrt(1 / cosine**2 - 1) * unit(rng.standard_normal((n, dim)))
    vectors[: n // 10] = rng.standard_normal((n // 10, dim))  # unrelated prompts
    vectors = vectors[rng.permutation(n)]
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


@pytest.mark.parametrize("block", [64, 256, 5000])
def test_synthetic_set_matches_the_dense_computation(block):
    vectors = clustered_vectors(1500)
    found = assert_same_as_dense(vectors, 0.92, 0.8, block)
    # the set is not trivial: many duplicates, and groups with several members
    assert 100 < (found.duplicate_of >= 0).sum() < 1400
    assert np.bincount(found.groups).max() > 5 and len(set(found.groups)) > 50


def test_single_and_empty_inputs():
    one = near_duplicates(clustered_vectors(10)[:1], 0.9, 0.8)
    assert one.duplicate_of.tolist() == [-1] and one.groups.tolist() == [0]
    none = near_duplicates(np.zeros((0, 384), np.float32), 0.9, 0.8)
    assert len(none.duplicate_of) == 0 and len(none.groups) == 0


@pytest.mark.parametrize(("threshold", "related"), [(0.92, 0.8), (0.7, 0.6), (0.6, 0.5)])
@pytest.mark.parametrize("block", [64, 2048])
def test_real_data_matches_the_dense_computation(real_vectors, threshold, related, block):
    """On the MiniLM vectors of data/scenarios after validation and exact deduplication."""
    vectors = np.stack(list(real_vectors.values()))
    found = assert_same_as_dense(vectors, threshold, related, block)
    if threshold < 0.7:  # lower thresholds so that the real data has duplicates and groups
        assert (found.duplicate_of >= 0).sum() > 10 and len(set(found.groups)) < 0.9 * len(
            found.groups
        )


def test_curation_memory_is_not_quadratic(tmp_path, monkeypatch):
    """8,000 prompts: a dense similarity matrix alone would take 256 MB (plus its boolean
    mask); the blocked computation stays far below."""
    n = 8_000
    rows = [scenario(f"s{i}", f"question {i}") for i in range(n)]
    source = tmp_path / "big.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    vectors = np.random.default_rng(0).standard_normal((n, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    monkeypatch.setattr("argen.judging.embeddings.embed", lambda texts: vectors[: len(texts)])
    tracemalloc.start()
    try:
        curated = curate_frames(CurateConfig(sources=[source]))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(curated.scenarios) == n
    assert peak < 128 * 2**20, f"peak {peak / 2**20:.0f} MiB"


def all_related_vectors(n, seed=1):
    """Unit vectors at cosine 0.93 to one centre: every pair about 0.86, related but no
    duplicate, so the related pairs number n^2 / 2."""
    rng = np.random.default_rng(seed)
    centre = rng.standard_normal(384)
    centre /= np.linalg.norm(centre)
    noise = rng.standard_normal((n, 384))
    noise -= np.outer(noise @ centre, centre)
    noise /= np.linalg.norm(noise, axis=1, keepdims=True)
    return (0.93 * centre + np.sqrt(1 - 0.93**2) * noise).astype(np.float32)


def traced_peak(function, *args, **kwargs):
    """(result, peak bytes numpy and Python allocated while `function` ran)."""
    tracemalloc.start()
    try:
        result = function(*args, **kwargs)
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_set_where_every_pair_is_related():
    """n^2 / 2 related pairs (18 million at n = 6000): memory depends on the block size, not on
    how many pairs there are."""
    assert_same_as_dense(all_related_vectors(1200), 0.92, 0.8, block=256)
    peaks = {}
    for n in (3000, 6000):
        found, peaks[n] = traced_peak(near_duplicates, all_related_vectors(n), 0.92, 0.8, 1024)
        assert (found.duplicate_of < 0).all() and set(found.groups) == {0}
    assert peaks[6000] < 1.3 * peaks[3000] and peaks[6000] < 100 * 2**20, peaks
