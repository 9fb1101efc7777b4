"""Preference pairs for preference tuning: a train prompt's demonstration over its bad answers.

Each pair is (prompt, chosen, rejected): the chosen answer is the prompt's demonstration
(`argen.data.demonstrations`), the rejected one an answer to the same prompt that a labeller read
as bad against `data/GUIDE.md` (`argen.data.labels`): mostly this project's own policies'
samples, so the pairs show the policy its own failures. Only train-split prompts pair (joined by
scenario id, like the demonstrations): a validation or test prompt never reaches training.
"""

import pandas as pd

from argen.errors import ArgenError
from argen.judging.propositions import HARMFUL


def preference_pairs(
    paired: pd.DataFrame, labels: pd.DataFrame, per_prompt: int, seed: int
) -> pd.DataFrame:
    """One row per pair (`id`, `prompt`, `chosen`, `rejected`, `harmful`, `origin`): for each
    demonstration of `paired` (train scenarios with their `response`), up to `per_prompt` of the
    answers `labels` reads as bad for that scenario, harmful ones first, the rest drawn with
    `seed`. An answer identical to the demonstration is never its own rejection."""
    bad = labels[(labels["quality"] == "bad") & (labels["split"] == "train")]
    bad = bad.assign(harmful=bad[list(HARMFUL)].fillna(False).astype(bool).any(axis=1))
    bad = bad.sample(frac=1.0, random_state=seed).sort_values(
        "harmful", ascending=False, kind="stable"
    )
    bad = bad.groupby("scenario", sort=False).head(per_prompt)
    pairs = paired[["id", "prompt", "response"]].merge(
        bad[["scenario", "response", "harmful", "origin"]].rename(
            columns={"scenario": "id", "response": "rejected"}
        ),
        on="id",
    )
    pairs = pairs.rename(columns={"response": "chosen"})
    pairs = pairs[pairs["chosen"].str.strip() != pairs["rejected"].str.strip()]
    if pairs.empty:
        raise ArgenError(
            "no labelled bad answer matches a train prompt with a demonstration; check "
            "prefer.labels and sft.demonstrations"
        )
    return pairs.sort_values(["id", "rejected"]).reset_index(drop=True)


def statistics(pairs: pd.DataFrame) -> str:
    """One line for the log: pairs, prompts, and how many rejected answers are harmful."""
    return (
        f"{len(pairs)} preference pairs over {pairs['id'].nunique()} train prompts "
        f"({int(pairs['harmful'].sum())} of the rejected answers harmful)"
    )
