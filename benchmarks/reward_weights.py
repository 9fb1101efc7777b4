"""The reward's dimension weights against the gold ranking: of two labelled answers to one prompt
whose quality differs (good > acceptable > bad), how often does a judge's combined score put
the better one first, and would other weights do better?

    python -m benchmarks.reward_weights JUDGE [JUDGE ...] [--labels DIR] [--step 0.05]

JUDGE is `local`, `reader` (the packaged reading grader) or `reader:FOLDER`. The items are the
labelled answers to validation-split prompts (`argen.training.grader.held_out_split`): no
packaged grader learned from them. Each judge scores them once through the shared rubric maths;
the combined score is then recomputed for every weighting on a grid over the simplex
(`judge.weights`). Reported per judge, with 95% intervals over prompts resampled: the recipe's
weights, each dimension alone, weights chosen out of fold (five folds of prompts: chosen on
four, measured on the fifth) and the weights chosen on every item, the ones a team would set.
"""

import argparse
import asyncio
import itertools
import logging
from pathlib import Path

import numpy as np
import pandas as pd

from argen.config import JudgeConfig, load_config
from argen.data.labels import LABELS, read_labels
from argen.judging.base import JudgeItem, score_items
from argen.judging.propositions import QUALITIES
from argen.judging.rubric import DIMENSIONS
from argen.judging.scoring import make_backend
from argen.training.criteria import FOLDS, prompt_folds
from argen.training.grader import held_out_split
from benchmarks.twin_pairs import judge_overrides

log = logging.getLogger("reward_weights")


def ranked_pairs(frame: pd.DataFrame) -> np.ndarray:
    """(better, worse) row positions of every two answers to one prompt whose quality differs."""
    rank = frame["quality"].map(QUALITIES.index).to_numpy()
    pairs = [
        (i, j) if rank[i] > rank[j] else (j, i)
        for rows in frame.groupby("prompt", sort=False).indices.values()
        for i, j in itertools.combinations(rows, 2)
        if rank[i] != rank[j]
    ]
    return np.array(pairs, dtype=int).reshape(-1, 2)


def pair_wins(scores: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """1 where the better answer scores higher, 0.5 for a tie, 0 where it scores lower."""
    diff = scores[pairs[:, 0]] - scores[pairs[:, 1]]
    return np.where(np.abs(diff) <= 1e-9, 0.5, (diff > 0).astype(float))


def simplex(step: float) -> np.ndarray:
    """Every weighting of the three dimensions on a grid of `step`, summing to one."""
    n = round(1 / step)
    return np.array([(a, d, n - a - d) for a in range(n + 1) for d in range(n + 1 - a)]) / n


def best_weights(dims: np.ndarray, pairs: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """The weighting of `grid` whose combined score wins most of `pairs` (the first of equals)."""
    wins = [pair_wins(dims @ w, pairs).mean() if len(pairs) else 0.0 for w in grid]
    return grid[int(np.argmax(wins))]


def out_of_fold_wins(
    dims: np.ndarray, prompts: np.ndarray, pairs: np.ndarray, grid: np.ndarray
) -> tuple[np.ndarray, list[np.ndarray]]:
    """Each pair's win under the weights chosen on the other folds' prompts, and those weights."""
    fold = prompt_folds(pd.Series(prompts), seed=0)[pairs[:, 0]]
    wins = np.zeros(len(pairs))
    chosen = []
    for k in range(FOLDS):
        weights = best_weights(dims, pairs[fold != k], grid)
        wins[fold == k] = pair_wins(dims @ weights, pairs[fold == k])
        chosen.append(weights)
    return wins, chosen


def interval(wins: np.ndarray, prompt_of_pair: np.ndarray, resamples: int = 1000) -> str:
    """The share of pairs won with a 95% percentile interval, prompts resampled."""
    codes, group = np.unique(prompt_of_pair, return_inverse=True)
    won = np.bincount(group, weights=wins, minlength=len(codes))
    count = np.bincount(group, minlength=len(codes))
    draws = np.random.default_rng(0).integers(0, len(codes), (resamples, len(codes)))
    shares = won[draws].sum(1) / count[draws].sum(1)
    low, high = np.percentile(shares, [2.5, 97.5])
    return f"{wins.mean():.3f} [{low:.3f}, {high:.3f}]"


def judge_dimensions(judge: JudgeConfig, frame: pd.DataFrame) -> np.ndarray:
    """Each answer's three dimension scores by `judge` (n, 3); an answer it failed to judge
    stops the measurement (a missing score is never counted as a loss)."""
    items = [
        JudgeItem(str(row.item), row.prompt, row.response, row.tier, row.scope)
        for row in frame.itertuples()
    ]
    rows = asyncio.run(score_items(make_backend(judge), items))
    failed = [r for r in rows if not r["judge_ok"]]
    if failed:
        raise SystemExit(f"{judge.backend}: {len(failed)} of {len(rows)} answers were not judged")
    return np.array([[r[d] for d in DIMENSIONS] for r in rows], dtype=float)


def weights_table(spec: str, frame: pd.DataFrame, step: float) -> pd.DataFrame:
    """One row per weighting: its weights and the share of ranked pairs it wins."""
    judge = load_config("default", judge_overrides(spec)).judge
    recipe = np.array([getattr(judge.weights, d) for d in DIMENSIONS])
    pairs = ranked_pairs(frame)
    if not len(pairs):
        raise SystemExit("no two labelled answers to one prompt differ in quality: nothing to rank")
    dims = judge_dimensions(judge, frame)
    prompts = frame["prompt"].to_numpy()
    owner = prompts[pairs[:, 0]]
    grid = simplex(step)
    oof, chosen = out_of_fold_wins(dims, prompts, pairs, grid)
    fitted = best_weights(dims, pairs, grid)
    named = [("recipe's weights", recipe / recipe.sum())]
    named += [(f"{d} alone", np.eye(3)[k]) for k, d in enumerate(DIMENSIONS)]
    rows = [
        {
            "weighting": name,
            "weights": fmt(w),
            "pairs won": interval(pair_wins(dims @ w, pairs), owner),
        }
        for name, w in named
    ]
    rows.append(
        {
            "weighting": "chosen out of fold",
            "weights": "; ".join(fmt(w) for w in chosen),
            "pairs won": interval(oof, owner),
        }
    )
    rows.append(
        {
            "weighting": "chosen on every item",
            "weights": fmt(fitted),
            "pairs won": interval(pair_wins(dims @ fitted, pairs), owner),
        }
    )
    log.info(
        "%s: %d answers, %d prompts, %d ranked pairs",
        spec,
        len(frame),
        len(set(prompts)),
        len(pairs),
    )
    return pd.DataFrame(rows)


def fmt(weights: np.ndarray) -> str:
    return "/".join(f"{w:.2f}" for w in weights)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("judges", nargs="+", help="local, reader or reader:FOLDER")
    parser.add_argument("--labels", type=Path, default=LABELS)
    parser.add_argument("--step", type=float, default=0.05, help="grid step of the weights")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    _, held = held_out_split(read_labels(args.labels))
    frame = held.reset_index(drop=True)
    for spec in args.judges:
        table = weights_table(spec, frame, args.step)
        log.info(
            "%s (weights: ahimsa/dharma/helpfulness):\n%s", spec, table.to_markdown(index=False)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
