"""Paired proportions: the 2x2 table of two models' flags on the same prompts, McNemar's exact
test on it, a rate's Wilson 95% interval and the change's Newcombe 95% interval; shared by the
judge's and the audit's rates."""

import math

import numpy as np
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.proportion import proportion_confint


def paired_table(base: np.ndarray, aligned: np.ndarray) -> list[list[int]]:
    """2x2 counts of paired flags: rows baseline yes/no, columns aligned yes/no."""
    return [
        [int((base & aligned).sum()), int((base & ~aligned).sum())],
        [int((~base & aligned).sum()), int((~base & ~aligned).sum())],
    ]


def mcnemar_p(table: list[list[int]]) -> float:
    """McNemar's exact test on a paired 2x2 table."""
    return float(mcnemar(table, exact=True).pvalue)


def wilson(k: int, n: int) -> tuple[float, float]:
    """The Wilson 95% interval of `k` in `n` (NaN for none)."""
    if not n:
        return math.nan, math.nan
    low, high = proportion_confint(k, n, method="wilson")
    return float(low), float(high)


def paired_change_interval(table: list[list[int]]) -> tuple[float, float, float]:
    """The change of a paired rate (aligned minus baseline) with its 95% interval: Newcombe's
    hybrid score method for paired proportions (Statistics in Medicine 17, 2635-2650, 1998,
    method 10): both Wilson intervals, combined through the flags' continuity-corrected phi.
    McNemar says whether a rate moved; this says by how much (NaN for no pairs)."""
    (a, b), (c, d) = table  # rows: baseline yes/no; columns: aligned yes/no
    n = a + b + c + d
    if not n:
        return math.nan, math.nan, math.nan
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = wilson(a + b, n)
    l2, u2 = wilson(a + c, n)
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    cross = a * d - b * c
    corrected = cross - n / 2 if cross > n / 2 else min(cross, 0)
    phi = corrected / math.sqrt(margins) if margins else 0.0
    change = p2 - p1
    below = math.sqrt(max((p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2, 0))
    above = math.sqrt(max((u2 - p2) ** 2 - 2 * phi * (u2 - p2) * (p1 - l1) + (p1 - l1) ** 2, 0))
    return change, max(change - below, -1.0), min(change + above, 1.0)


def holm_adjust(pvalues: np.ndarray) -> np.ndarray:
    """Holm-adjusted p-values of one family; NaN (no test) stays NaN and is not counted.

    statsmodels' ``multipletests(method="holm")`` computes these same numbers, the same way, but
    runs a full garbage collection on every call: a quarter of a second each in a process that
    holds torch, and a report makes two families per comparison."""
    pvalues = np.asarray(pvalues, dtype=float)
    valid = ~np.isnan(pvalues)
    tested = pvalues[valid]
    order = np.argsort(tested)
    stepped = np.maximum.accumulate(tested[order] * np.arange(len(tested), 0, -1))
    adjusted = np.full_like(pvalues, np.nan)
    in_order = np.empty_like(tested)
    in_order[order] = np.minimum(stepped, 1.0)
    adjusted[valid] = in_order
    return adjusted
