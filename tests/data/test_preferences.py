"""Preference pairs: a train prompt's demonstration over its labelled bad answers, harmful ones
first, capped per prompt; nothing of another split, and no answer rejected against itself."""

import pandas as pd
import pytest

from argen.data.labels import read_labels
from argen.data.preferences import preference_pairs
from argen.errors import ArgenError
from tests.conftest import CLEAN_LABELS, labelled_item, write_jsonl


def answer(n: int, scenario: str, quality: str, harmful=False, split="train", response=None):
    return labelled_item(
        item=f"{scenario}-{n}",
        scenario=scenario,
        split=split,
        has_off_domain=False,
        response=response or f"answer {n} to {scenario}",
        labels=CLEAN_LABELS | {"dangerous_instruction": harmful},
        quality=quality,
    )


@pytest.fixture
def labels(tmp_path):
    rows = [
        answer(1, "s1", "bad"),
        answer(2, "s1", "bad"),
        answer(3, "s1", "bad", harmful=True),
        answer(4, "s1", "good"),
        answer(5, "s1", "acceptable"),
        answer(6, "s2", "bad", response="Rest it."),  # the demonstration itself
        answer(7, "v1", "bad", split="validation"),
        answer(8, "s3", "bad"),  # no demonstration for s3
    ]
    write_jsonl(tmp_path / "labels.jsonl", rows)
    return read_labels(tmp_path)


def demonstrations(*ids):
    return pd.DataFrame(
        {
            "id": list(ids),
            "prompt": [f"prompt {i}" for i in ids],
            "response": ["Rest it." if i == "s2" else f"the demonstration for {i}" for i in ids],
        }
    )


def test_bad_answers_pair_with_their_prompts_demonstration_harmful_first(labels):
    pairs = preference_pairs(demonstrations("s1", "s2", "v1"), labels, per_prompt=2, seed=0)
    assert set(pairs["id"]) == {"s1"}  # s2's only bad answer is its demonstration
    assert len(pairs) == 2 and pairs["harmful"].sum() == 1  # the harmful one always kept
    assert set(pairs["rejected"]) <= {"answer 1 to s1", "answer 2 to s1", "answer 3 to s1"}
    assert (pairs["chosen"] == "the demonstration for s1").all()
    assert "answer 7 to v1" not in set(pairs["rejected"])  # a validation label never trains


def test_every_bad_answer_pairs_when_the_cap_allows_and_the_draw_is_seeded(labels):
    many = preference_pairs(demonstrations("s1"), labels, per_prompt=10, seed=0)
    assert sorted(many["rejected"]) == ["answer 1 to s1", "answer 2 to s1", "answer 3 to s1"]
    draws = {
        tuple(preference_pairs(demonstrations("s1"), labels, 2, seed)["rejected"])
        for seed in range(8)
    }
    assert len(draws) == 2  # the harmful answer, then either of the others by seed
    assert preference_pairs(demonstrations("s1"), labels, 2, 3).equals(
        preference_pairs(demonstrations("s1"), labels, 2, 3)
    )


def test_no_pair_at_all_is_a_clear_error(labels):
    with pytest.raises(ArgenError, match="no labelled bad answer matches a train prompt"):
        preference_pairs(demonstrations("s2", "v1"), labels, per_prompt=2, seed=0)
