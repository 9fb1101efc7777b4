"""Duplicate prompts: exact (up to case, punctuation and spacing) and near (cosine similarity).

Near duplicates and related groups are found in bounded memory: similarities are computed one
block of rows against one block of columns at a time (unit vectors, so a dot product is the
cosine), only pairs at or above a threshold are kept, and related pairs are merged into groups
(connected components) after each block of rows. A row's pairs with one group are reduced to one
edge, so memory grows with n and the block size, never n x n, however related the prompts are.
"""

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

BLOCK = 2048
"""Rows and columns per similarity block: a block is BLOCK x BLOCK float32 (16 MiB)."""


def _exact_key(prompt: str) -> str:
    """The prompt casefolded with every run of non-word characters made one space."""
    return re.sub(r"[^\w]+", " ", prompt.casefold()).strip()


def drop_exact_duplicates(frame: pd.DataFrame) -> tuple[pd.DataFrame, list[dict]]:
    """Drop prompts equal to an earlier one up to case, punctuation and spacing."""
    keys = frame["prompt"].map(_exact_key)
    first: dict[str, object] = {}
    dropped = []
    for index, key in keys.items():
        if key in first:
            dropped.append(
                {
                    "id": frame.at[index, "id"],
                    "duplicate_of": first[key],
                    "kind": "exact",
                    "similarity": 1.0,
                }
            )
        else:
            first[key] = frame.at[index, "id"]
    keep = ~keys.duplicated()
    return frame[keep].reset_index(drop=True), dropped


@dataclass
class NearDuplicates:
    """Which rows are near duplicates (of which kept row, how similar) and the kept rows' groups.

    `duplicate_of[i]` is the index of the kept row that row i duplicates, -1 when i is kept;
    `similarity[i]` is that pair's cosine similarity (NaN when kept); `groups` has one label per
    kept row, in row order, numbered by each group's first row.
    """

    duplicate_of: np.ndarray
    similarity: np.ndarray
    groups: np.ndarray

    @property
    def kept(self) -> np.ndarray:
        """Indices of the kept rows, ascending."""
        return np.flatnonzero(self.duplicate_of < 0)


def _first_seen_labels(labels: np.ndarray) -> np.ndarray:
    """Renumber labels 0, 1, ... in the order each first appears."""
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    rank = np.empty(len(first), np.int64)
    rank[np.argsort(first)] = np.arange(len(first))
    return rank[inverse.reshape(-1)]


class _Walk:
    """State of the walk over the rows: duplicates decided so far and the groups of kept rows
    (`root[i]`: the first row of i's group among the rows merged so far)."""

    def __init__(self, n: int, threshold: float, related: float):
        """n rows, none decided yet, each its own group."""
        self.threshold, self.related = threshold, related
        self.duplicate_of = np.full(n, -1, np.int64)
        self.similarity = np.full(n, np.nan, np.float32)
        self.root = np.arange(n)

    def scan(self, sim: np.ndarray, row0: int, col0: int, best, best_at) -> np.ndarray:
        """Rows against an earlier block of columns: update each row's most similar kept column
        (earliest on ties) and return its related edges as (row, group root) keys.

        Only rows whose maximum reaches the lower threshold are looked at further; a row's
        `best` is exact whenever it reaches the near-duplicate threshold, all that is decided on.
        """
        rows = np.flatnonzero(sim.max(axis=1) >= min(self.threshold, self.related))
        if not len(rows):
            return np.zeros(0, np.int64)
        kept = self.duplicate_of[col0 : col0 + sim.shape[1]] < 0
        part = np.where(kept[None, :], sim[rows], -np.inf)
        at = part.argmax(axis=1)
        value = part[np.arange(len(rows)), at]
        better = value > best[rows]
        best[rows[better]] = value[better]
        best_at[rows[better]] = at[better] + col0
        pair_rows, pair_cols = np.nonzero(part >= self.related)
        heads = rows[pair_rows].astype(np.int64) + row0
        return np.unique(heads * len(self.root) + self.root[pair_cols + col0])

    def resolve(self, diag: np.ndarray, start: int, best, best_at) -> None:
        """Decide a block's rows in order: a row is a duplicate of its most similar earlier kept
        row (earlier blocks already in `best`) when that similarity reaches the threshold."""
        below = np.where(np.tri(len(diag), k=-1, dtype=bool), diag, -np.inf)
        close = below.max(axis=1, initial=-np.inf) >= self.threshold
        for r in range(len(diag)):
            if close[r]:
                kept = self.duplicate_of[start : start + r] < 0
                masked = np.where(kept, below[r, :r], -np.inf)
                at = int(masked.argmax())
                if masked[at] > best[r]:
                    best[r], best_at[r] = masked[at], start + at
            if best[r] >= self.threshold:
                self.duplicate_of[start + r] = best_at[r]
                self.similarity[start + r] = best[r]

    def merge(self, heads: np.ndarray, tails: np.ndarray) -> None:
        """Join the groups of related kept rows (edges with a dropped row are ignored)."""
        kept = self.duplicate_of < 0
        both = kept[heads] & kept[tails]
        if not both.any():
            return
        from scipy.sparse import csr_matrix
        from scipy.sparse.csgraph import connected_components

        n = len(self.root)
        joined = np.flatnonzero(self.root != np.arange(n))
        heads = np.concatenate([joined, heads[both]])
        tails = np.concatenate([self.root[joined], tails[both]])
        graph = csr_matrix((np.ones(len(heads), bool), (heads, tails)), shape=(n, n))
        labels = connected_components(graph, directed=False)[1]
        _, first = np.unique(labels, return_index=True)
        self.root = first[labels]


def near_duplicates(
    vectors: np.ndarray, threshold: float, related_threshold: float, block: int = BLOCK
) -> NearDuplicates:
    """Walk prompts in order: each one whose cosine similarity to an earlier kept prompt reaches
    `threshold` is a duplicate of the most similar such prompt; kept prompts with similarity at
    or above `related_threshold` (transitively) form one group. `vectors` are unit rows."""
    n = len(vectors)
    walk = _Walk(n, threshold, related_threshold)
    for start in range(0, n, block):
        rows = vectors[start : start + block]
        best = np.full(len(rows), -np.inf, np.float32)
        best_at = np.full(len(rows), -1, np.int64)
        scanned = [
            walk.scan(rows @ vectors[col : col + block].T, start, col, best, best_at)
            for col in range(0, start, block)
        ]
        diag = rows @ rows.T
        walk.resolve(diag, start, best, best_at)
        keys = np.unique(np.concatenate(scanned)) if scanned else np.zeros(0, np.int64)
        in_rows, in_cols = np.nonzero(np.tril(diag >= related_threshold, -1))
        walk.merge(
            np.concatenate([keys // max(n, 1), in_rows.astype(np.int64) + start]),
            np.concatenate([keys % max(n, 1), in_cols.astype(np.int64) + start]),
        )
    kept = walk.duplicate_of < 0
    groups = _first_seen_labels(walk.root[kept]) if n else np.zeros(0, np.int64)
    return NearDuplicates(walk.duplicate_of, walk.similarity, groups)
