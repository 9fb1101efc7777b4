"""Paired proportions: the 2x2 table of two models' flags on the same prompts, McNemar's exact
test on it, and a rate's Wilson 95% interval; shared by the judge's and the audit's rates."""

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
