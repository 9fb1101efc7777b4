"""The report's PNG plots: means, score distributions, per-category differences, training."""

import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from scipy import stats  # noqa: E402

from argen.reporting.compare import SCORES, Comparison  # noqa: E402


def save(fig, path: Path) -> None:
    """Lay out, write at the report's resolution and free the figure."""
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_means(comparison: Comparison, path: Path) -> None:
    """Both models' mean per dimension with 95% t-intervals."""
    ok = comparison.paired[comparison.paired["both_ok"]]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for offset, model, color in ((-0.2, "base", "#888888"), (0.2, "aligned", "#2a7ab9")):
        means, errors = [], []
        for dim in SCORES:
            values = ok[f"{dim}_{model}"].astype(float)
            means.append(values.mean())
            half = (
                stats.sem(values) * stats.t.ppf(0.975, len(values) - 1) if len(values) > 1 else 0.0
            )
            errors.append(half)
        ax.bar(
            [i + offset for i in range(len(SCORES))],
            means,
            width=0.4,
            yerr=errors,
            color=color,
            capsize=3,
            label="baseline" if model == "base" else "aligned",
        )
    ax.set_xticks(range(len(SCORES)), SCORES)
    ax.set_ylim(0, 1)
    ax.set_ylabel("mean score")
    ax.legend(loc="lower right")
    ax.set_title("Mean scores with 95% intervals")
    save(fig, path)


def plot_distributions(comparison: Comparison, path: Path) -> None:
    """Histograms of both models' scores per dimension."""
    ok = comparison.paired[comparison.paired["both_ok"]]
    fig, axes = plt.subplots(1, len(SCORES), figsize=(12, 3), sharey=True)
    bins = [i / 20 for i in range(21)]
    for ax, dim in zip(axes, SCORES, strict=True):
        ax.hist(ok[f"{dim}_base"], bins=bins, alpha=0.6, color="#888888", label="baseline")
        ax.hist(ok[f"{dim}_aligned"], bins=bins, alpha=0.6, color="#2a7ab9", label="aligned")
        ax.set_title(dim)
    axes[0].legend()
    save(fig, path)


def plot_category_deltas(comparison: Comparison, path: Path) -> None:
    """The combined score's difference per category with its 95% interval."""
    table = comparison.breakdowns["category"]
    table = table[table["dimension"] == "combined"]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    y = range(len(table))
    low = (table["difference"] - table["ci_low"]).fillna(0).clip(lower=0)
    high = (table["ci_high"] - table["difference"]).fillna(0).clip(lower=0)
    ax.errorbar(table["difference"], list(y), xerr=[low, high], fmt="o", capsize=3)
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_yticks(
        list(y), [f"{c} (n={n})" for c, n in zip(table["category"], table["n"], strict=True)]
    )
    ax.set_xlabel("combined score: aligned - baseline (95% CI)")
    save(fig, path)


def plot_training(training_log: pd.DataFrame, path: Path) -> bool:
    """Reward curves per dimension and validation score, when the log has them."""
    curves = [
        c
        for c in training_log.columns
        if re.fullmatch(r"rewards/\w+/mean|reward|validation/combined|kl", c)
    ]
    if not curves or "step" not in training_log:
        return False
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for column in curves:
        series = training_log[["step", column]].dropna()
        if not series.empty:
            ax.plot(
                series["step"],
                series[column],
                marker="." if len(series) < 30 else None,
                label=column,
            )
    ax.set_xlabel("optimizer step")
    ax.legend(fontsize=7)
    ax.set_title("Training curves")
    save(fig, path)
    return True
