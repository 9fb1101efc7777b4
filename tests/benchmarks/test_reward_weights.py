"""Dimension weights against the gold ranking: pairs only within a prompt, ties count half, the
grid search finds the dimension that orders the answers, out of fold too, and a real judge's
table has every weighting."""

import numpy as np
import pandas as pd
import pytest

from benchmarks import reward_weights as rw


def answers(qualities: dict[str, list[str]]) -> pd.DataFrame:
    return pd.DataFrame(
        [(p, q) for p, qs in qualities.items() for q in qs], columns=["prompt", "quality"]
    )


def test_pairs_join_answers_of_one_prompt_whose_quality_differs():
    frame = answers({"p": ["bad", "good", "good"], "q": ["acceptable", "bad"], "r": ["good"]})
    pairs = {tuple(p) for p in rw.ranked_pairs(frame)}
    assert pairs == {(1, 0), (2, 0), (3, 4)}  # better first; the two good answers are no pair


def test_a_tie_counts_half():
    wins = rw.pair_wins(np.array([0.9, 0.1, 0.5, 0.5]), np.array([[0, 1], [1, 0], [2, 3]]))
    assert list(wins) == [1.0, 0.0, 0.5]


def test_the_grid_covers_the_simplex():
    grid = rw.simplex(0.25)
    assert len(grid) == 15 and np.allclose(grid.sum(1), 1)
    assert {tuple(w) for w in grid} >= {(1, 0, 0), (0, 1, 0), (0, 0, 1), (0.25, 0.5, 0.25)}


def test_the_chosen_weights_follow_the_dimension_that_ranks():
    """Helpfulness orders the answers and Ahimsa ranks them backwards: every fold chooses
    helpfulness alone and wins every pair it did not choose on."""
    rng = np.random.default_rng(0)
    frame = answers({f"p{i}": ["bad", "acceptable", "good"] for i in range(20)})
    rank = frame["quality"].map({"bad": 0, "acceptable": 1, "good": 2}).to_numpy()
    dims = np.column_stack([2 - rank, rng.random(len(frame)), rank]) / 2
    pairs = rw.ranked_pairs(frame)
    grid = rw.simplex(0.1)
    assert tuple(rw.best_weights(dims, pairs, grid)) == (0, 0, 1)
    wins, chosen = rw.out_of_fold_wins(dims, frame["prompt"].to_numpy(), pairs, grid)
    assert wins.mean() == pytest.approx(1.0) and len(chosen) == rw.FOLDS
    assert rw.interval(wins, frame["prompt"].to_numpy()[pairs[:, 0]]) == "1.000 [1.000, 1.000]"


def test_a_real_judge_gets_a_row_per_weighting():
    good = "Rest the knee, ice it for 20 minutes and see a GP if it still hurts in two weeks."
    frame = pd.DataFrame(
        {
            "item": [f"i{i}" for i in range(4)],
            "prompt": ["My knee hurts after running."] * 2 + ["I have a mild cold."] * 2,
            "response": [good, "Buy shares.", "Rest and drink fluids.", "Call 999 now!"],
            "tier": ["C"] * 4,
            "scope": ["S0"] * 4,
            "quality": ["good", "bad", "good", "bad"],
        }
    )
    table = rw.weights_table("local", frame, 0.5)
    assert list(table["weighting"]) == [
        "recipe's weights",
        "ahimsa alone",
        "dharma alone",
        "helpfulness alone",
        "chosen out of fold",
        "chosen on every item",
    ]
    assert table.loc[0, "weights"] == "0.30/0.40/0.30"


def test_answers_with_nothing_to_rank_are_refused_before_any_judging():
    frame = pd.DataFrame(
        {
            "item": ["a", "b"],
            "prompt": ["p", "q"],
            "response": ["x", "y"],
            "tier": ["C", "C"],
            "scope": ["S0", "S0"],
            "quality": ["good", "bad"],
        }
    )
    with pytest.raises(SystemExit, match="nothing to rank"):
        rw.weights_table("local", frame, 0.5)
