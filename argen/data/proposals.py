"""Proposed labels for prompts that come without tier, scope and category.

A multinomial logistic regression per label, over the packaged MiniLM sentence embeddings of
labelled examples (the curation's own labelled rows and `curate.label_examples`, by default
`data/scenarios`), scores each unlabelled prompt; the proposal is the most probable combination
of tier, scope and category among those the examples hold (so no proposal pairs labels the
examples never pair, such as out_of_domain with S0), and its probability is the proposal's
confidence. Offline, deterministic and quick (a second for hundreds of prompts), it is a first
draft for a person to check, not a label: `MEASURED` says how often it agrees with held-out
real labels, and curation keeps proposed labels out of the test split until they are reviewed.

`python -m benchmarks.label_proposals` measures that agreement again on `data/scenarios`
(proposals for the validation and test splits' prompts from the train split's labels).
"""

import numpy as np
import pandas as pd

from argen.data.schema import LABELS

REGULARISATION = 3.0
"""Inverse regularisation strength of each label's regression (sklearn's C)."""

MEASURED = {
    "validation": {"n": 64, "tier": 0.781, "scope": 0.922, "category": 0.828, "all": 0.609},
    "test": {"n": 131, "tier": 0.733, "scope": 0.901, "category": 0.756, "all": 0.542},
}
"""Share of held-out prompts of `data/scenarios` (curated with the default recipe) whose
proposal, learned from the train split alone, matches the real label: what
`python -m benchmarks.label_proposals` prints (a slow test holds this to it)."""


def propose(queries: np.ndarray, examples: np.ndarray, labels: pd.DataFrame) -> pd.DataFrame:
    """For each query embedding: the proposed tier, scope and category, and `confidence` (the
    combination's probability among those the examples hold). `labels` has one row per
    example embedding."""
    combos = sorted(set(map(tuple, labels[list(LABELS)].to_numpy())))
    joint = np.ones((len(queries), len(combos)))
    for position, field in enumerate(LABELS):
        probability = _field_probabilities(queries, examples, labels[field])
        joint *= np.stack([probability[combo[position]] for combo in combos], axis=1)
    joint /= joint.sum(axis=1, keepdims=True)
    best = joint.argmax(axis=1)
    proposed = pd.DataFrame([combos[i] for i in best], columns=list(LABELS))
    proposed["confidence"] = joint[np.arange(len(queries)), best].round(3)
    return proposed


def _field_probabilities(
    queries: np.ndarray, examples: np.ndarray, values: pd.Series
) -> dict[str, np.ndarray]:
    """Each value's probability for each query (a field with one value in the examples: 1)."""
    from sklearn.linear_model import LogisticRegression  # 2 s to import: only when proposing

    classes = sorted(values.unique())
    if len(classes) == 1:
        return {classes[0]: np.ones(len(queries))}
    model = LogisticRegression(C=REGULARISATION, max_iter=3000).fit(examples, values.to_numpy())
    probability = model.predict_proba(queries)
    return {value: probability[:, i] for i, value in enumerate(model.classes_)}


def agreement(scenarios: pd.DataFrame, vectors: np.ndarray) -> dict[str, dict]:
    """How often proposals learned from the train split match the real labels of each other
    split: per label and for all three at once, with the number of prompts."""
    train = (scenarios["split"] == "train").to_numpy()
    result = {}
    for split in ("validation", "test"):
        held = (scenarios["split"] == split).to_numpy()
        proposed = propose(vectors[held], vectors[train], scenarios[train])
        truth = scenarios[held][list(LABELS)].reset_index(drop=True)
        same = proposed[list(LABELS)] == truth
        result[split] = {
            "n": int(held.sum()),
            **{field: round(float(same[field].mean()), 3) for field in LABELS},
            "all": round(float(same.all(axis=1).mean()), 3),
        }
    return result


def agreement_text() -> str:
    """One sentence for a data card: the measured agreement on held-out labelled prompts."""
    held = "; ".join(
        f"{split} split ({f['n']} prompts): tier {f['tier']:.0%}, scope {f['scope']:.0%}, "
        f"category {f['category']:.0%}, all three {f['all']:.0%}"
        for split, f in MEASURED.items()
    )
    return (
        "Proposals learned from the train split of the project's scenarios match the real "
        f"labels of its held-out prompts this often: {held}."
    )
