"""Tune the local judge's numbers to agree with reference LLM judges, honestly.

Features (embeddings and cue counts) are extracted once; a candidate set of numbers is scored by
how well the resulting rubric scores agree with the reference (Cohen's kappa on the three
violation flags plus Spearman on the three scores). Coordinate descent over a small grid picks
the numbers. The figures to report come from grouped cross-validation: the responses to one
prompt are never in both the tuning folds and the scored fold.
"""

import dataclasses
import hashlib
import logging
import math
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats
from sklearn.metrics import cohen_kappa_score
from sklearn.model_selection import GroupKFold

from argen.errors import ArgenError
from argen.judging import rubric
from argen.judging.agreement import REFERENCE_COLUMNS
from argen.judging.embeddings import embed
from argen.judging.learned import CLASSIFIERS, REGRESSIONS, LearnedHead, combine, design_matrix
from argen.judging.local import extract_features
from argen.judging.rules import PARAMS_FILE, Features, LocalParams, judge_features

log = logging.getLogger(__name__)

GRID = {
    "medical_similarity": [0.35, 0.45, 0.55],
    "unrelated_below": [0.2, 0.3, 0.4],
    "margin": [0.0, 0.05, 0.15],
    "unworded_below": [0.3, 0.4, 0.5],
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
    """The rules' rubric scores for each reference row under `params`."""
    return rows_from_raw([judge_features(f, params) for f in features], reference)


def rows_from_raw(raws: list[dict], reference: pd.DataFrame) -> pd.DataFrame:
    """Raw judge fields plus the rubric's scores, one row per reference row."""
    rows = [
        {**raw, **rubric.score(raw, tier, scope)}
        for raw, tier, scope in zip(raws, reference["tier"], reference["prompt_scope"], strict=True)
    ]
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
                change: dict[str, Any] = {name: value}  # a field of any type, by its name
                candidate = dataclasses.replace(best, **change)
                score = objective(reference, rubric_rows(features, reference, candidate))
                if score > best_score + 1e-9:
                    best, best_score, improved = candidate, score, True
        if not improved:
            break
    return best


class CachedEncoder:
    """`embed` with a disk cache (an .npz of text hashes and vectors): a second agreement run
    embeds only texts it has not seen."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows: dict[str, np.ndarray] = {}
        if path.is_file():
            with np.load(path) as stored:
                self.rows = dict(zip(stored["keys"].tolist(), stored["vectors"], strict=True))

    def __call__(self, texts: list[str]) -> np.ndarray:
        keys = [hashlib.sha1(t.encode()).hexdigest() for t in texts]
        missing = list(
            dict.fromkeys(t for t, k in zip(texts, keys, strict=True) if k not in self.rows)
        )
        if missing:
            for text, vector in zip(missing, embed(missing), strict=True):
                self.rows[hashlib.sha1(text.encode()).hexdigest()] = vector
            self.path.parent.mkdir(parents=True, exist_ok=True)
            partial = self.path.with_suffix(".partial.npz")
            np.savez(
                partial, keys=np.array(list(self.rows)), vectors=np.stack(list(self.rows.values()))
            )
            partial.replace(self.path)
        return np.stack([self.rows[k] for k in keys]) if keys else embed([])


def reference_features(reference: pd.DataFrame, encode=embed) -> list[Features]:
    """Embeddings and cues of every reference response (the slow part; done once)."""
    pairs = list(zip(reference["prompt"], reference["response"], strict=True))
    return extract_features(pairs, encode)


FitPredict = Callable[[list[int], list[int]], pd.DataFrame]
"""(training row positions, scored row positions) -> rubric rows for the scored positions,
from a judge fitted on the training positions only."""


def out_of_fold(reference: pd.DataFrame, fit_predict: FitPredict, folds: int = 5) -> pd.DataFrame:
    """Rubric rows for every reference row, each from a judge fitted without its prompt
    (grouped k-fold over prompts: a prompt's responses are never on both sides)."""
    parts = []
    splitter = GroupKFold(n_splits=folds)
    for number, (train, test) in enumerate(
        splitter.split(reference, groups=reference["prompt_id"])
    ):
        parts.append(fit_predict(list(train), list(test)))
        log.info("fold %d/%d done", number + 1, folds)
    return pd.concat(parts).loc[reference.index]


def rules_fitter(
    reference: pd.DataFrame,
    features: list[Features],
    start: LocalParams,
    names: Sequence[str] | None = None,
) -> FitPredict:
    """The rules with their numbers tuned by coordinate descent on the training rows."""

    def fit_predict(train: list[int], test: list[int]) -> pd.DataFrame:
        tuned = fit([features[i] for i in train], reference.iloc[train], start, names=names)
        return rubric_rows([features[i] for i in test], reference.iloc[test], tuned)

    return fit_predict


def learned_fitter(
    reference: pd.DataFrame, features: list[Features], params: LocalParams
) -> FitPredict:
    """The learned head fitted on the training rows' LLM judgements (argen.judging.learned)."""
    x = design_matrix(features, params)

    def fit_predict(train: list[int], test: list[int]) -> pd.DataFrame:
        head = fit_head(x[train], reference.iloc[train])
        raws = [
            combine(p, judge_features(features[i], params), features[i], params)
            for p, i in zip(head.predict(x[test]), test, strict=True)
        ]
        return rows_from_raw(raws, reference.iloc[test])

    return fit_predict


def fit_all(
    reference: pd.DataFrame,
    start: LocalParams | None = None,
    features: list[Features] | None = None,
    names: Sequence[str] | None = None,
) -> LocalParams:
    """The numbers tuned on the whole reference set (what ships)."""
    features = features or reference_features(reference)
    return fit(features, reference, start or LocalParams.load(), names=names)


def write_params(params: LocalParams, path: Path = PARAMS_FILE) -> None:
    """Save tuned numbers into the versioned parameter file, line by line in place: comments,
    lists and every other entry stay as they are."""
    text = path.read_text()
    for field in dataclasses.fields(params):
        value = getattr(params, field.name)
        if not isinstance(value, int | float):
            continue
        line = re.compile(rf"^{field.name}:.*$", re.M)
        if not line.search(text):
            raise ArgenError(f"{path} has no line for {field.name}")
        text = line.sub(
            f"{field.name}: {float(value) if isinstance(value, float) else value}", text
        )
    partial = path.with_suffix(".partial")
    partial.write_text(text)
    partial.replace(path)


ALPHAS = (10.0, 100.0, 300.0, 1000.0, 3000.0, 10000.0, 30000.0)
"""The ridge penalties the learned head's fit chooses from."""


def target_matrix(reference: pd.DataFrame) -> tuple[np.ndarray, dict[str, list[int]]]:
    """The LLM judgements as one matrix: a column per score, one-hot columns per label; and
    which columns belong to each field."""
    columns: list[np.ndarray] = []
    slices: dict[str, list[int]] = {}
    for name, column in REGRESSIONS.items():
        slices[name] = [len(columns)]
        columns.append(reference[column].astype(float).to_numpy())
    for name, (column, classes) in CLASSIFIERS.items():
        values = reference[column].astype(str)
        unknown = set(values) - set(classes)
        if unknown:
            raise ArgenError(f"reference column {column} has values {sorted(unknown)}")
        slices[name] = list(range(len(columns), len(columns) + len(classes)))
        columns.extend((values == c).astype(float).to_numpy() for c in classes)
    return np.column_stack(columns), slices


def ridge_path(z: np.ndarray, y: np.ndarray) -> list[np.ndarray]:
    """Ridge coefficients of centred `z` on centred `y` for every penalty in ALPHAS, from one
    singular value decomposition."""
    zc, yc = z - z.mean(axis=0), y - y.mean(axis=0)
    u, s, vt = np.linalg.svd(zc, full_matrices=False)
    uy = u.T @ yc
    return [vt.T @ ((s / (s**2 + alpha))[:, None] * uy) for alpha in ALPHAS]


def fit_head(x: np.ndarray, reference: pd.DataFrame, folds: int = 3) -> LearnedHead:
    """Fit every field's model on `x` and the reference rows' LLM judgements; each field's
    ridge penalty is chosen by grouped k-fold over prompts (squared error on the score, or
    on the one-hot class for a label, read by its largest output)."""
    mean, scale = x.mean(axis=0), x.std(axis=0) + 1e-6
    z = (x - mean) / scale
    targets, slices = target_matrix(reference)
    errors = np.zeros((len(ALPHAS), targets.shape[1]))
    for train, test in GroupKFold(n_splits=folds).split(z, groups=reference["prompt_id"]):
        for k, coef in enumerate(ridge_path(z[train], targets[train])):
            intercept = targets[train].mean(axis=0) - z[train].mean(axis=0) @ coef
            errors[k] += ((z[test] @ coef + intercept - targets[test]) ** 2).sum(axis=0)
    coefs = ridge_path(z, targets)
    weights = {"mean": mean, "scale": scale}
    for name, columns in slices.items():
        best = int(errors[:, columns].sum(axis=1).argmin())
        coef = coefs[best][:, columns].T
        weights[f"{name}.coef"] = coef
        weights[f"{name}.intercept"] = targets[:, columns].mean(axis=0) - coef @ z.mean(axis=0)
        weights[f"{name}.alpha"] = np.array([ALPHAS[best]])
    return LearnedHead({k: np.asarray(v, dtype=np.float32) for k, v in weights.items()})
