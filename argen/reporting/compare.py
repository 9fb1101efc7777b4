"""Paired comparison of a baseline and an aligned results file: pairing, checks, statistics,
breakdowns, verdict and release gate. Numbers only; `argen.reporting.report` renders them."""

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from argen.config import BEHAVIOUR_CHECKS, GateRule, ReportConfig
from argen.errors import ArgenError
from argen.evaluation.behaviours import Grader
from argen.evaluation.indicators import INDICATORS
from argen.evaluation.results import read_results
from argen.judging.rubric import DIMENSIONS
from argen.outputs import Evaluation
from argen.reporting import behaviour
from argen.reporting.paired import holm_adjust, mcnemar_p, paired_table, wilson
from argen.reporting.sheet import Sheet, sheet_rows

SCORES = (*DIMENSIONS, "combined")
VIOLATIONS = tuple(f"{d}_violation" for d in DIMENSIONS)
KEEP = ("id", "prompt", "tier", "scope", "category")
PER_MODEL = ("response", "n_response_tokens", "truncated", "judge_ok", *SCORES, *VIOLATIONS)


@dataclass
class Comparison:
    """Everything the report needs: the reward judge's statistics, and the audit's (`audit`:
    which grader and whether it is independent of the reward; behaviour rates overall and per
    category, its failing per dimension, the reward judge beside it, response lengths)."""

    paired: pd.DataFrame
    scores: pd.DataFrame
    violations: pd.DataFrame
    breakdowns: dict[str, pd.DataFrame]
    models: pd.DataFrame
    indicators: pd.DataFrame
    verdict: list[dict]
    gate: list[dict]
    judge: dict
    audit: dict
    behaviours: pd.DataFrame
    behaviours_by_category: pd.DataFrame
    audit_dimensions: pd.DataFrame
    reward_vs_audit: list[dict]
    length: dict
    sheet: Sheet
    mismatches: list[str] = field(default_factory=list)

    @property
    def gate_passed(self) -> bool:
        return all(rule["passed"] for rule in self.gate)


def load(results_path: Path) -> tuple[pd.DataFrame, dict]:
    """A results parquet and its evaluation's summary beside it (empty when absent)."""
    frame = read_results(results_path)  # checked: a tampered score is an error, not a result
    missing = [c for c in (*KEEP, *PER_MODEL, "judge", "rubric_version") if c not in frame]
    if missing:
        raise ArgenError(f"{results_path} is not a results file: lacks {', '.join(missing)}")
    evaluation = Evaluation.of_results(results_path)
    summary = evaluation.record() if evaluation.is_complete() else {}
    return frame, summary


def mismatches(
    base: pd.DataFrame, aligned: pd.DataFrame, base_summary: dict, aligned_summary: dict
) -> list[str]:
    """Reasons the two results are not comparable (empty when they are)."""
    found = []
    for column, what in (("judge", "judges"), ("rubric_version", "rubric versions")):
        a, b = set(base[column].dropna()), set(aligned[column].dropna())
        if a != b:
            found.append(f"different {what}: baseline {sorted(a)}, aligned {sorted(b)}")
    if set(base["id"]) != set(aligned["id"]):
        only = len(set(base["id"]) ^ set(aligned["id"]))
        found.append(f"different scenario sets ({only} ids in only one of them)")
    a, b = base_summary.get("settings", {}), aligned_summary.get("settings", {})
    for key in ("generation", "system_prompt_sha256", "judge_weights", "scenarios_sha256"):
        if a.get(key) != b.get(key):
            found.append(f"different {key.replace('_', ' ')}: {a.get(key)} vs {b.get(key)}")
    return found


def pair(base: pd.DataFrame, aligned: pd.DataFrame) -> pd.DataFrame:
    """One row per scenario id with both models' columns (suffixes _base, _aligned) and deltas."""
    extra = [c for c in INDICATORS if c in base and c in aligned]
    merged = base[[*KEEP, *PER_MODEL, *extra]].merge(
        aligned[["id", *PER_MODEL, *extra]],
        on="id",
        suffixes=("_base", "_aligned"),
        validate="1:1",
    )
    merged["both_ok"] = merged["judge_ok_base"] & merged["judge_ok_aligned"]
    for dim in SCORES:
        merged[f"{dim}_delta"] = merged[f"{dim}_aligned"] - merged[f"{dim}_base"]
    return merged


def score_stats(paired: pd.DataFrame, config: ReportConfig, with_p: bool = True) -> pd.DataFrame:
    """Means, paired bootstrap CI of the difference, Wilcoxon p, effect size, win/tie/loss."""
    ok = paired[paired["both_ok"]]
    rows = []
    for dim in SCORES:
        base, aligned = ok[f"{dim}_base"].to_numpy(float), ok[f"{dim}_aligned"].to_numpy(float)
        delta = aligned - base
        low, high = bootstrap_ci(base, aligned, config) if len(delta) > 1 else (math.nan,) * 2
        rows.append(
            {
                "dimension": dim,
                "n": len(delta),
                "baseline": base.mean() if len(base) else math.nan,
                "aligned": aligned.mean() if len(aligned) else math.nan,
                "difference": delta.mean() if len(delta) else math.nan,
                "ci_low": low,
                "ci_high": high,
                "p_wilcoxon": wilcoxon_p(delta) if with_p else math.nan,
                "effect_dz": effect_size(delta),
                "wins": int((delta > 1e-9).sum()),
                "ties": int((abs(delta) <= 1e-9).sum()),
                "losses": int((delta < -1e-9).sum()),
            }
        )
    return pd.DataFrame(rows)


def bootstrap_ci(
    base: np.ndarray, aligned: np.ndarray, config: ReportConfig
) -> tuple[float, float]:
    """Paired BCa bootstrap 95% CI of mean(aligned - base)."""
    if np.allclose(aligned - base, (aligned - base)[0]):
        d = float((aligned - base)[0])
        return d, d
    result = stats.bootstrap(
        (base, aligned),
        lambda b, a, axis=-1: np.mean(a - b, axis=axis),
        paired=True,
        vectorized=True,
        method="BCa",
        n_resamples=config.bootstrap_resamples,
        random_state=np.random.default_rng(config.seed),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def wilcoxon_p(delta: np.ndarray) -> float:
    """Two-sided Wilcoxon signed-rank p (normal approximation, which handles ties); 1 if no
    pair differs."""
    if not np.any(np.abs(delta) > 1e-12):
        return 1.0
    return float(stats.wilcoxon(delta, method="asymptotic").pvalue)


def effect_size(delta: np.ndarray) -> float:
    """Cohen's d_z for paired data: mean difference over its standard deviation."""
    if len(delta) < 2 or np.std(delta, ddof=1) == 0:
        return math.nan
    return float(np.mean(delta) / np.std(delta, ddof=1))


def violation_stats(paired: pd.DataFrame, with_p: bool = True) -> pd.DataFrame:
    """Both violation rates with Wilson 95% intervals, and McNemar's exact test."""
    ok = paired[paired["both_ok"]]
    rows = []
    for name in VIOLATIONS:
        base = ok[f"{name}_base"].astype(bool).to_numpy()
        aligned = ok[f"{name}_aligned"].astype(bool).to_numpy()
        n = len(base)
        b_low, b_high = wilson(int(base.sum()), n)
        a_low, a_high = wilson(int(aligned.sum()), n)
        table = paired_table(base, aligned)
        p = mcnemar_p(table) if with_p and n else math.nan
        rows.append(
            {
                "violation": name.removesuffix("_violation"),
                "n": n,
                "baseline": base.mean() if n else math.nan,
                "baseline_low": b_low,
                "baseline_high": b_high,
                "aligned": aligned.mean() if n else math.nan,
                "aligned_low": a_low,
                "aligned_high": a_high,
                "fixed": table[0][1],
                "introduced": table[1][0],
                "p_mcnemar": p,
            }
        )
    return pd.DataFrame(rows)


def holm(scores: pd.DataFrame, violations: pd.DataFrame) -> None:
    """Holm-adjust the whole family of p-values in place (column ``p_holm``)."""
    pvalues = np.concatenate([scores["p_wilcoxon"].to_numpy(), violations["p_mcnemar"].to_numpy()])
    adjusted = holm_adjust(pvalues)
    scores["p_holm"] = adjusted[: len(scores)]
    violations["p_holm"] = adjusted[len(scores) :]


def breakdown(paired: pd.DataFrame, column: str, config: ReportConfig) -> pd.DataFrame:
    """Per-group means and differences; p-values only for groups of at least min_group_n."""
    rows = []
    for group, part in paired.groupby(column, sort=True):
        big_enough = int(part["both_ok"].sum()) >= config.min_group_n
        table = score_stats(part, config, with_p=big_enough)
        table.insert(0, column, group)
        rows.append(table)
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()


def model_facts(paired: pd.DataFrame) -> pd.DataFrame:
    """Length, truncation and judge failures per model: what a judge may reward by accident."""
    rows = []
    for model in ("base", "aligned"):
        rows.append(
            {
                "model": "baseline" if model == "base" else "aligned",
                "mean_response_tokens": paired[f"n_response_tokens_{model}"].mean(),
                "truncation_rate": paired[f"truncated_{model}"].mean(),
                "judge_failures": int((~paired[f"judge_ok_{model}"]).sum()),
                "judge_failure_rate": float((~paired[f"judge_ok_{model}"]).mean()),
            }
        )
    return pd.DataFrame(rows)


def indicator_stats(paired: pd.DataFrame) -> pd.DataFrame:
    """Rates of the judge-gaming indicators for both models, with Wilson 95% intervals, and
    McNemar's exact test on the scenarios where both models' responses are flagged or not."""
    rows = []
    for column, meaning in INDICATORS.items():
        if f"{column}_base" not in paired:
            continue
        row: dict[str, object] = {"column": column, "indicator": meaning}
        for model, label in (("base", "baseline"), ("aligned", "aligned")):
            values = paired[f"{column}_{model}"].dropna().astype(bool)
            n, k = len(values), int(values.sum())
            low, high = wilson(k, n)
            row |= {
                "n": n,
                label: k / n if n else math.nan,
                f"{label}_low": low,
                f"{label}_high": high,
            }
        both = paired[[f"{column}_base", f"{column}_aligned"]].dropna().astype(bool)
        table = paired_table(both.iloc[:, 0].to_numpy(), both.iloc[:, 1].to_numpy())
        row["p_mcnemar"] = mcnemar_p(table) if len(both) else math.nan
        rows.append(row)
    return pd.DataFrame(rows)


def verdict(scores: pd.DataFrame, alpha: float) -> list[dict]:
    """Per dimension: improved, worse, or no change beyond noise, with its interval."""
    result = []
    for row in scores.itertuples():
        significant = not math.isnan(row.p_holm) and row.p_holm < alpha
        if significant and row.ci_low > 0:
            call = "improved"
        elif significant and row.ci_high < 0:
            call = "worse"
        else:
            call = "no change beyond noise"
        result.append(
            {
                "dimension": row.dimension,
                "call": call,
                "difference": row.difference,
                "ci_low": row.ci_low,
                "ci_high": row.ci_high,
                "p_holm": row.p_holm,
            }
        )
    return result


def evaluate_gate(
    rules: list[GateRule],
    scores: pd.DataFrame,
    violations: pd.DataFrame,
    models: pd.DataFrame,
    indicators: pd.DataFrame,
    alpha: float,
    behaviours: pd.DataFrame,
    audit: dict,
) -> list[dict]:
    """Each rule's pass or fail, with the evidence it rests on."""
    by_dim = scores.set_index("dimension")
    by_violation = violations.set_index("violation")
    by_indicator = indicators.set_index("column") if len(indicators) else indicators
    results = []
    for rule in rules:
        if rule.check in (*BEHAVIOUR_CHECKS, "audit_independent"):
            text, passed, evidence = behaviour.gate_rule(rule, behaviours, audit)
        elif rule.check == "indicator_not_rising":
            assert rule.indicator is not None  # GateRule requires one for this check
            if rule.indicator not in by_indicator.index:
                passed, evidence = False, f"no {rule.indicator} indicator in the results"
            else:
                row = by_indicator.loc[rule.indicator]
                passed = not (row.aligned > row.baseline and row.p_mcnemar < alpha)
                evidence = (
                    f"rate {row.baseline:.3f} -> {row.aligned:.3f} "
                    f"(McNemar exact p {row.p_mcnemar:.3g})"
                )
            text = f"no rise beyond noise: the response {INDICATORS[rule.indicator]}"
        elif rule.check == "violation_rate_drops":
            row = by_violation.loc[rule.dimension]
            passed = bool(row.aligned < row.baseline)
            evidence = f"{rule.dimension} violation rate {row.baseline:.3f} -> {row.aligned:.3f}"
            text = f"{rule.dimension} violation rate must drop"
        elif rule.check in ("score_improves", "score_not_worse"):
            row = by_dim.loc[rule.dimension]
            bound = 0.0 if rule.check == "score_improves" else -rule.margin
            passed = bool(row.ci_low > bound)
            evidence = (
                f"{rule.dimension} difference {row.difference:+.3f}, 95% CI "
                f"[{row.ci_low:+.3f}, {row.ci_high:+.3f}]"
            )
            text = (
                f"{rule.dimension} must improve (CI above 0)"
                if rule.check == "score_improves"
                else f"{rule.dimension} may not fall by more than {rule.margin} (CI lower bound)"
            )
        else:
            worst = float(models["judge_failure_rate"].max())
            passed = worst < rule.value
            evidence = f"highest judge failure rate {worst:.1%}"
            text = f"judge failures below {rule.value:.0%}"
        results.append({"rule": text, "passed": passed, "evidence": evidence})
    return results


def load_comparable(
    baseline: Path, aligned: Path, allow_mismatch: bool
) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """Both results files and what makes them not comparable (an error unless allowed)."""
    base, base_summary = load(baseline)
    other, other_summary = load(aligned)
    found = mismatches(base, other, base_summary, other_summary)
    if found and not allow_mismatch:
        raise ArgenError(
            "the results are not comparable (set report.allow_mismatch=true to "
            "compare anyway):\n  " + "\n  ".join(found)
        )
    return base, other, found


def compare(
    baseline: Path,
    aligned: Path,
    config: ReportConfig,
    grader: Grader,
    reward_judge: str | None = None,
    optimised_labels: Sequence[str] = (),
) -> Comparison:
    """Pair, check and compare two results files, and audit both models' answers with `grader`.
    `reward_judge` names the judge training optimised (its record's); without it, the judge that
    scored the results stands for it. `optimised_labels` are the label sets a preference stage
    tuned the policy against (its record's)."""
    base, other, found = load_comparable(baseline, aligned, config.allow_mismatch)
    paired = pair(base, other)
    if paired.empty:
        raise ArgenError("the two results files share no scenario ids")
    paired = behaviour.audited(paired, grader)
    scores = score_stats(paired, config)
    violations = violation_stats(paired)
    holm(scores, violations)
    models = model_facts(paired)
    indicators = indicator_stats(paired)
    behaviours = behaviour.behaviour_stats(paired)
    dimensions = behaviour.dimension_stats(paired)
    behaviour.holm_audit(behaviours, dimensions)
    scored_by = sorted({*base["judge"].dropna(), *other["judge"].dropna()})
    judges = [reward_judge] if reward_judge else scored_by
    audit = behaviour.audit_record(grader, judges, optimised_labels)
    judge = {
        "name": ", ".join(scored_by),
        "rubric_version": ", ".join(sorted({*base["rubric_version"].dropna().astype(str)})),
    }
    calls = verdict(scores, config.alpha)
    gate = evaluate_gate(
        config.gate, scores, violations, models, indicators, config.alpha, behaviours, audit
    )
    return Comparison(
        paired=paired,
        scores=scores,
        violations=violations,
        breakdowns={c: breakdown(paired, c, config) for c in ("tier", "scope", "category")},
        models=models,
        indicators=indicators,
        verdict=calls,
        gate=gate,
        judge=judge,
        audit=audit,
        behaviours=behaviours,
        behaviours_by_category=behaviour.by_category(paired),
        audit_dimensions=dimensions,
        reward_vs_audit=behaviour.reward_vs_audit(calls, violations, dimensions, config.alpha),
        length=behaviour.length_stats(paired),
        sheet=sheet_rows(paired, config.reading_sheet, config.seed),
        mismatches=found,
    )
