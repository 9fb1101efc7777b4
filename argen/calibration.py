"""Tune the local judge's numbers to agree with reference LLM judges, honestly.

Features (embeddings and cue counts) are extracted once; a candidate set of numbers is scored by
how well the resulting rubric scores agree with the reference (Cohen's kappa on the three
violation flags plus Spearman on the three scores). Coordinate descent over a small grid picks
the numbers. The figures to report come from grouped cross-validation: the responses to one
prompt are never in both the tuning folds and the scored fold.
"""

import dataclasses
import logging
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import yaml
from scipy import stats
from sklearn.metrics import cohen_kappa_score
from sklearn.model_selection import GroupKFold

from argen.agreement import REFERENCE_COLUMNS
from argen.judges import rubric
from argen.judges.local import PARAMS_FILE, Features, LocalParams, extract_features, judge_features

log = logging.getLogger(__name__)

GRID = {
    "medical_similarity": [0.35, 0.45, 0.55],
    "unrelated_below": [0.2, 0.3, 0.4],
    "margin": [0.0, 0.05, 0.15],
    "tangential_weight": [0.2, 0.5, 0.8],
    "safety_base": [0.3, 0.45, 0.6],
    "safety_referral": [0.1, 0.2, 0.35],
    "harm_dosing": [0.0, 0.2, 0.4],
    "cut_off_penalty": [0.1, 0.3, 0.5],
    "relevance_floor": [0.0, 0.1, 0.2],
    "empathy_base": [0.2, 0.3, 0.5],
    "deflection_penalty": [0.0, 0.25, 0.5, 0.75, 1.0],
}
"""The numbers tuned and the values tried for each."""


def rubric_rows(
    features: list[Features], reference: pd.DataFrame, params: LocalParams
) -> pd.DataFrame:
    """Our rubric scores for each reference row under `params`."""
    rows = []
    for feature, tier, scope in zip(
        features, reference["tier"], reference["prompt_scope"], strict=True
    ):
        raw = judge_features(feature, params)
        rows.append({**raw, **rubric.score(raw, tier, scope)})
    return pd.DataFrame(rows, index=reference.index)


WEIGHTS = {"ahimsa": 1.0, "dharma": 2.0, "helpfulness": 1.0}
"""Dharma counts double: staying in the domain is what the pipeline exists to train."""


def objective(reference: pd.DataFrame, ours: pd.DataFrame) -> float:
    """Weighted sum of violation kappas and score Spearman correlations per dimension."""
    total = 0.0
    for dim in rubric.DIMENSIONS:
        weight = WEIGHTS[dim]
        flag = f"{dim}_violation"
        theirs = reference[REFERENCE_COLUMNS[flag]].astype(bool)
        mine = ours[flag].astype(bool)
        if theirs.nunique() > 1 or mine.nunique() > 1:
            kappa = cohen_kappa_score(theirs, mine)
            total += 0.0 if math.isnan(kappa) else weight * kappa
        if ours[dim].nunique() > 1:
            rho = stats.spearmanr(reference[REFERENCE_COLUMNS[dim]], ours[dim]).statistic
            total += 0.0 if math.isnan(rho) else weight * rho
    return total


def fit(
    features: list[Features],
    reference: pd.DataFrame,
    start: LocalParams,
    passes: int = 2,
    names: Sequence[str] | None = None,
) -> LocalParams:
    """Coordinate descent over GRID (or only its `names`), starting from `start`."""
    grid = {k: v for k, v in GRID.items() if names is None or k in names}
    best = start
    best_score = objective(reference, rubric_rows(features, reference, best))
    for _ in range(passes):
        improved = False
        for name, values in grid.items():
            for value in values:
                if getattr(best, name) == value:
                    continue
                candidate = dataclasses.replace(best, **{name: value})
                score = objective(reference, rubric_rows(features, reference, candidate))
                if score > best_score + 1e-9:
                    best, best_score, improved = candidate, score, True
        if not improved:
            break
    return best


def reference_features(reference: pd.DataFrame) -> list[Features]:
    """Embeddings and cues of every reference response (the slow part; done once)."""
    return extract_features(list(zip(reference["prompt"], reference["response"], strict=True)))


def cross_validate(
    reference: pd.DataFrame,
    folds: int = 5,
    start: LocalParams | None = None,
    features: list[Features] | None = None,
    names: Sequence[str] | None = None,
) -> tuple[pd.DataFrame, list[LocalParams]]:
    """Out-of-fold rubric rows (each scored with numbers tuned without its prompt) and the
    numbers each fold chose."""
    start = start or LocalParams.load()
    features = features or reference_features(reference)
    out_of_fold = []
    chosen = []
    splitter = GroupKFold(n_splits=folds)
    for number, (tune, score) in enumerate(
        splitter.split(reference, groups=reference["prompt_id"])
    ):
        tuned = fit([features[i] for i in tune], reference.iloc[tune], start, names=names)
        chosen.append(tuned)
        out_of_fold.append(rubric_rows([features[i] for i in score], reference.iloc[score], tuned))
        log.info("fold %d/%d tuned", number + 1, folds)
    return pd.concat(out_of_fold).loc[reference.index], chosen


def fit_all(
    reference: pd.DataFrame,
    start: LocalParams | None = None,
    features: list[Features] | None = None,
    names: Sequence[str] | None = None,
) -> LocalParams:
    """The numbers tuned on the whole reference set (what ships)."""
    features = features or reference_features(reference)
    return fit(features, reference, start or LocalParams.load(), names=names)


def write_params(params: LocalParams, header: str) -> None:
    """Save tuned numbers to the versioned parameter file."""
    values = {f.name: getattr(params, f.name) for f in dataclasses.fields(params)}
    values = {k: (float(v) if isinstance(v, float | np.floating) else v) for k, v in values.items()}
    PARAMS_FILE.write_text(header + yaml.safe_dump(values, sort_keys=False))
