"""How the report writes numbers: scores to three places, p-values with a floor."""

import math

import pandas as pd


def fmt(x: float, signed: bool = False) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return f"{x:+.3f}" if signed else f"{x:.3f}"


def fmt_p(p: float) -> str:
    if p is None or math.isnan(p):
        return "n/a"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def tested_columns(frame: pd.DataFrame, discordant: dict[str, str]) -> dict[str, pd.Series]:
    """A paired rate table's last columns: the discordant pairs (`discordant`: heading by
    column) and McNemar's exact p, raw and Holm-adjusted."""
    return {
        **{heading: frame[name] for heading, name in discordant.items()},
        "McNemar exact p": frame["p_mcnemar"].map(fmt_p),
        "Holm p": frame["p_holm"].map(fmt_p),
    }
