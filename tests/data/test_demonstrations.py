"""Reading demonstrations: every answer checked, errors name file and line, only answers to
train-split prompts are paired, written prompts join them, and a written prompt related to an
evaluation prompt is refused."""

import numpy as np
import pandas as pd
import pytest

from argen.data import demonstrations
from argen.data.demonstrations import (
    check_written_prompts,
    closest_evaluation_prompts,
    pair_with_train,
    read_demonstrations,
)
from argen.errors import ArgenError
from argen.judging.embeddings import embed
from tests.conftest import write_jsonl
from tests.data.conftest import EMBED

WRITTEN = {
    "id": "wp-1",
    "prompt": "Who do I ask about a repeat prescription while I'm abroad?",
    "tier": "C",
    "scope": "S1",
    "category": "para_clinical",
    "response": "Ask your usual pharmacy before you go ...",
    "writer": "w",
}


def test_a_folder_of_files_is_read_whole(tmp_path):
    write_jsonl(tmp_path / "a.jsonl", [{"id": "x1", "response": "one", "writer": "w"}])
    write_jsonl(tmp_path / "b.jsonl", [{"id": "x2", "response": "two"}])
    frame = read_demonstrations(tmp_path)
    assert frame[["id", "response"]].to_dict("records") == [
        {"id": "x1", "response": "one"},
        {"id": "x2", "response": "two"},
    ]
    assert frame["prompt"].isna().all()  # answers to scenarios bring no prompt


def test_several_sources_are_read_as_one_and_keep_written_prompts(tmp_path):
    write_jsonl(tmp_path / "a.jsonl", [{"id": "x1", "response": "one"}])
    (tmp_path / "b").mkdir()
    write_jsonl(tmp_path / "b" / "w.jsonl", [WRITTEN])
    frame = read_demonstrations([tmp_path / "a.jsonl", tmp_path / "b"])
    assert frame["id"].tolist() == ["x1", "wp-1"]
    assert frame.iloc[1][["prompt", "tier", "scope", "category"]].tolist() == [
        WRITTEN["prompt"],
        "C",
        "S1",
        "para_clinical",
    ]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "b.jsonl:2: not valid JSON"),
        ('["a list"]', "b.jsonl:2: a demonstration must be a JSON object"),
        ('{"id": "x9", "response": "  "}', "b.jsonl:2: field 'response' must be"),
        ('{"response": "no id"}', "b.jsonl:2: field 'id' must be"),
        ('{"id": "x1", "response": "again"}', "b.jsonl:2: demonstration 'x1' repeats .*a.jsonl:1"),
        ('{"id": "w", "prompt": "p", "response": "r"}', "b.jsonl:2: field 'tier' must be"),
        (
            '{"id": "w", "prompt": "p", "tier": "D", "scope": "S0", "category": "clinical", '
            '"response": "r"}',
            "b.jsonl:2: tier 'D' is not one of A, B, C",
        ),
    ],
)
def test_a_bad_line_names_its_file_and_line(tmp_path, line, message):
    write_jsonl(tmp_path / "a.jsonl", [{"id": "x1", "response": "one"}])
    (tmp_path / "b.jsonl").write_text('{"id": "x2", "response": "fine"}\n' + line + "\n")
    with pytest.raises(ArgenError, match=message):
        read_demonstrations(tmp_path)


def test_a_missing_or_empty_source_is_an_error(tmp_path):
    with pytest.raises(ArgenError, match="not found"):
        read_demonstrations(tmp_path / "nowhere")
    with pytest.raises(ArgenError, match="holds no .jsonl"):
        read_demonstrations(tmp_path)


def test_only_train_prompts_are_paired():
    train = pd.DataFrame({"id": ["a", "b"], "prompt": ["pa", "pb"], "split": ["train"] * 2})
    demos = pd.DataFrame({"id": ["a", "test-1"], "response": ["ra", "rt"]})
    paired, left_out = pair_with_train(train, demos)
    assert paired[["id", "response"]].to_dict("records") == [{"id": "a", "response": "ra"}]
    assert left_out == 1
    with pytest.raises(ArgenError, match="train split only"):
        pair_with_train(train.assign(split="test"), demos)


def test_written_prompts_join_the_train_answers_and_may_not_reuse_a_scenario_id():
    train = pd.DataFrame({"id": ["a"], "prompt": ["pa"], "tier": ["C"], "split": ["train"]})
    demos = pd.DataFrame([{"id": "a", "response": "ra"}, WRITTEN]).drop(columns="writer")
    paired, left_out = pair_with_train(train, demos)
    assert paired[["id", "prompt", "split"]].values.tolist() == [
        ["a", "pa", "train"],
        ["wp-1", WRITTEN["prompt"], "train"],
    ]
    assert left_out == 0
    with pytest.raises(ArgenError, match="reuse scenario ids: a"):
        pair_with_train(train, demos.assign(id=["a", "a"]))


def one_hot_words(texts):
    """Vectors that make two texts as similar as the words they share (a stand-in encoder)."""
    vocabulary = sorted({w for t in texts for w in t.lower().split()})
    rows = np.array([[float(w in t.lower().split()) for w in vocabulary] for t in texts])
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def test_a_written_prompt_related_to_an_evaluation_prompt_is_refused(monkeypatch):
    monkeypatch.setattr(EMBED, one_hot_words)
    demos = pd.DataFrame([WRITTEN])
    far = pd.DataFrame({"id": ["v1"], "prompt": ["my knee hurts after running"]})
    near = pd.DataFrame({"id": ["t7"], "prompt": [WRITTEN["prompt"].replace("abroad", "away")]})
    check_written_prompts(closest_evaluation_prompts(demos, far), 0.8)
    closest = closest_evaluation_prompts(demos, pd.concat([far, near]))
    assert closest[["id", "evaluation_id"]].values.tolist() == [["wp-1", "t7"]]
    with pytest.raises(ArgenError, match=r"1 written prompt.*wp-1 ~ t7 \(0.9"):
        check_written_prompts(closest, 0.8)


def test_the_committed_demonstrations_match_their_card(real_vectors, monkeypatch):
    # the curation's vectors, encoded once; written and holdout prompts encoded here
    def vectors(texts):
        missing = [t for t in texts if t not in real_vectors]
        found = dict(zip(missing, embed(missing), strict=True)) if missing else {}
        return np.stack([real_vectors[t] if t in real_vectors else found[t] for t in texts])

    monkeypatch.setattr(EMBED, vectors)
    assert demonstrations.main(["--check"]) == 0
