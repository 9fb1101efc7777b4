"""Duplicate prompts: exact (up to case, punctuation and spacing) and near (cosine similarity).

Near duplicates and related groups are found in bounded memory: similarities are computed one
block of rows against one block of columns at a time (unit vectors, so a dot product is the
cosine), only pairs at or above a threshold are kept, and related pairs are merged into groups
(connected components) as they come, so memory grows with n and the block size, never n x n.
"""

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

BLOCK = 2048
"""Rows and columns per similarity block: a block is BLOCK x BLOCK float32 (16 MiB)."""

_PENDING_EDGES = 1 << 22
"""Related pairs buffered before they are folded into components (bounds the edge memory)."""


def _exact_key(prompt: str) -> str:
    """The prompt casefolded with every run of non-word characters made one space."""
    return re.sub(r"[^\w]+", " ", prompt.casefold()).strip()


def drop_exact_duplicates(frame: pd.DataFrame) -> tuple[pd.DataFrame, list[dict]]:
    """Drop prompts equal to an earlier one up to case, punctuation and spacing."""
    keys = frame["prompt"].map(_exact_key)
    first = {}
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


class _Components:
    """Connected components of a graph whose edges arrive in batches, in bounded memory."""

    def __init__(self, n: int):
        self.n = n
        self.heads: list[np.ndarray] = []
        self.tails: list[np.ndarray] = []
        self.pending = 0

    def add(self, heads: np.ndarray, tails: np.ndarray) -> None:
        """Add edges; past a budget, replace all edges by a star per component (same groups)."""
        if len(heads):
            self.heads.append(heads)
            self.tails.append(tails)
            self.pending += len(heads)
        if self.pending > max(_PENDING_EDGES, 2 * self.n):
            labels = self.labels()
            _, first = np.unique(labels, return_index=True)
            root = first[labels]
            joined = np.flatnonzero(root != np.arange(self.n))
            self.heads, self.tails, self.pending = [joined], [root[joined]], len(joined)

    def labels(self) -> np.ndarray:
        """One component label per node (scipy's numbering: by each component's first node)."""
        from scipy.sparse import csr_matrix
        from scipy.sparse.csgraph import connected_components

        heads = np.concatenate(self.heads) if self.heads else np.zeros(0, np.int64)
        tails = np.concatenate(self.tails) if self.tails else np.zeros(0, np.int64)
        graph = csr_matrix((np.ones(len(heads), bool), (heads, tails)), shape=(self.n, self.n))
        return connected_components(graph, directed=False)[1]


def _first_seen_labels(labels: np.ndarray) -> np.ndarray:
    """Renumber labels 0, 1, ... in the order each first appears."""
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    rank = np.empty(len(first), np.int64)
    rank[np.argsort(first)] = np.arange(len(first))
    return rank[inverse.reshape(-1)]


def _scan_block(sim: np.ndarray, kept: np.ndarray, row0: int, col0: int, thresholds, best, best_at):
    """One block of rows against an earlier block of columns: update each row's most similar
    kept column (earliest on ties) and return the related pairs (row, column) it holds.

    Only rows whose maximum reaches the lower threshold are looked at further; a row's `best`
    is exact whenever it reaches the near-duplicate threshold, which is all that is decided on.
    """
    threshold, related = thresholds
    rows = np.flatnonzero(sim.max(axis=1) >= min(threshold, related))
    if not len(rows):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    part = sim[rows]
    masked = part if kept.all() else np.where(kept[None, :], part, -np.inf)
    at = masked.argmax(axis=1)
    value = masked[np.arange(len(rows)), at]
    better = value > best[rows]
    best[rows[better]] = value[better]
    best_at[rows[better]] = at[better] + col0
    pair_rows, pair_cols = np.nonzero(part >= related)
    return rows[pair_rows].astype(np.int64) + row0, pair_cols.astype(np.int64) + col0


def _resolve_block(diag: np.ndarray, start: int, threshold: float, best, best_at, dup) -> None:
    """Decide the rows of one block in order: a row is a duplicate of its most similar earlier
    kept row (earlier blocks already in `best`) when that similarity reaches `threshold`."""
    below = np.where(np.tri(len(diag), k=-1, dtype=bool), diag, -np.inf)
    close = below.max(axis=1, initial=-np.inf) >= threshold
    similarity = dup["similarity"]
    duplicate_of = dup["duplicate_of"]
    for r in range(len(diag)):
        if close[r]:
            masked = np.where(duplicate_of[start : start + r] < 0, below[r, :r], -np.inf)
            at = int(masked.argmax())
            if masked[at] > best[r]:
                best[r], best_at[r] = masked[at], start + at
        if best[r] >= threshold:
            duplicate_of[start + r] = best_at[r]
            similarity[start + r] = best[r]


def _related_pairs(mask: np.ndarray, row0: int, col0: int) -> tuple[np.ndarray, np.ndarray]:
    """Global (row, column) indices of the True cells of a block's mask."""
    rows, cols = np.nonzero(mask)
    return rows.astype(np.int64) + row0, cols.astype(np.int64) + col0


def near_duplicates(
    vectors: np.ndarray, threshold: float, related_threshold: float, block: int = BLOCK
) -> NearDuplicates:
    """Walk prompts in order: each one whose cosine similarity to an earlier kept prompt reaches
    `threshold` is a duplicate of the most similar such prompt; kept prompts with similarity at
    or above `related_threshold` (transitively) form one group. `vectors` are unit rows."""
    n = len(vectors)
    dup = {
        "duplicate_of": np.full(n, -1, np.int64),
        "similarity": np.full(n, np.nan, np.float32),
    }
    components = _Components(n)
    for start in range(0, n, block):
        rows = vectors[start : start + block]
        best = np.full(len(rows), -np.inf, np.float32)
        best_at = np.full(len(rows), -1, np.int64)
        pairs = []
        for col in range(0, start, block):
            sim = rows @ vectors[col : col + block].T
            kept = dup["duplicate_of"][col : col + block] < 0
            thresholds = (threshold, related_threshold)
            pairs.append(_scan_block(sim, kept, start, col, thresholds, best, best_at))
        diag = rows @ rows.T
        _resolve_block(diag, start, threshold, best, best_at, dup)
        pairs.append(_related_pairs(np.tril(diag >= related_threshold, -1), start, start))
        kept = dup["duplicate_of"] < 0
        for heads, tails in pairs:
            both = kept[heads] & kept[tails]
            components.add(heads[both], tails[both])
    kept = dup["duplicate_of"] < 0
    groups = _first_seen_labels(components.labels()[kept]) if n else np.zeros(0, np.int64)
    return NearDuplicates(dup["duplicate_of"], dup["similarity"], groups)
