"""Near-duplicate detection at scale: time and peak memory of the dedup step of curation.

    python -m benchmarks.near_duplicates --n 250000

Runs `argen.data.dedup.near_duplicates` (the step curation runs after embedding) on seeded random
unit vectors of MiniLM's width (384), with some planted close pairs so that both the
near-duplicate and the related-group paths do work. It does not embed any text: embedding
250,000 prompts with MiniLM is a separate, larger cost. Peak memory is reported twice: numpy's
allocations during the step (tracemalloc, the input vectors excluded) and the growth of the
process's peak resident set over what it held before the step.
"""

import argparse
import json
import resource
import time
import tracemalloc

import numpy as np

from argen.data.dedup import BLOCK, near_duplicates

DIM = 384


def unit_rows(rng: np.random.Generator, n: int, chunk: int = 65536) -> np.ndarray:
    """n random unit float32 rows, drawn chunk by chunk (no float64 copy of the whole set)."""
    out = np.empty((n, DIM), np.float32)
    for start in range(0, n, chunk):
        rows = rng.standard_normal((min(chunk, n - start), DIM), dtype=np.float32)
        out[start : start + len(rows)] = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return out


def plant(vectors: np.ndarray, rng: np.random.Generator, count: int, cosine: float) -> None:
    """Overwrite `count` random rows with unit vectors at about `cosine` to another random row."""
    n = len(vectors)
    targets = rng.choice(n, size=count, replace=False)
    sources = rng.integers(0, n, size=count)
    noise = unit_rows(rng, count)
    vectors[targets] = vectors[sources] + np.sqrt(1 / cosine**2 - 1) * noise
    vectors[targets] /= np.linalg.norm(vectors[targets], axis=1, keepdims=True)


def measure(n: int, block: int, planted: int, seed: int) -> dict:
    """Build the input, then time the step and record its peak memory."""
    rng = np.random.default_rng(seed)
    vectors = unit_rows(rng, n)
    plant(vectors, rng, planted, 0.96)  # near duplicates at the default threshold 0.92
    plant(vectors, rng, planted, 0.86)  # related (0.8) but not duplicates
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    tracemalloc.start()
    start = time.perf_counter()
    found = near_duplicates(vectors, 0.92, 0.8, block=block)
    seconds = time.perf_counter() - start
    traced_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    groups = np.bincount(found.groups)
    return {
        "n": n,
        "block": block,
        "seconds": round(seconds, 1),
        "input_mib": round(vectors.nbytes / 2**20),
        "traced_peak_mib": round(traced_peak / 2**20, 1),
        "peak_rss_growth_mib": round(max(rss_after - rss_before, 0) / 2**20, 1),
        "peak_rss_mib": round(rss_after / 2**20),
        "dense_matrix_gib": round(n * n * 4 / 2**30, 1),
        "near_duplicates": int((found.duplicate_of >= 0).sum()),
        "groups_over_one": int((groups > 1).sum()),
    }


def main() -> None:
    """Parse the size and block options, measure once, print one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=250_000, help="prompts (vectors)")
    parser.add_argument("--block", type=int, default=BLOCK, help="rows per similarity block")
    parser.add_argument("--planted", type=int, default=1000, help="planted pairs of each kind")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(json.dumps(measure(args.n, args.block, args.planted, args.seed)))


if __name__ == "__main__":
    main()
