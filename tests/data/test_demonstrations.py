"""Reading demonstrations: every answer checked, errors name file and line, and only answers to
train-split prompts are paired."""

import pandas as pd
import pytest

from argen.data import demonstrations
from argen.data.demonstrations import pair_with_train, read_demonstrations
from argen.errors import ArgenError
from tests.conftest import write_jsonl
from tests.data.conftest import EMBED, looked_up


def test_a_folder_of_files_is_read_whole(tmp_path):
    write_jsonl(tmp_path / "a.jsonl", [{"id": "x1", "response": "one", "writer": "w"}])
    write_jsonl(tmp_path / "b.jsonl", [{"id": "x2", "response": "two"}])
    frame = read_demonstrations(tmp_path)
    assert frame.to_dict("records") == [
        {"id": "x1", "response": "one"},
        {"id": "x2", "response": "two"},
    ]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "b.jsonl:2: not valid JSON"),
        ('["a list"]', "b.jsonl:2: a demonstration must be a JSON object"),
        ('{"id": "x9", "response": "  "}', "b.jsonl:2: field 'response' must be"),
        ('{"response": "no id"}', "b.jsonl:2: field 'id' must be"),
        ('{"id": "x1", "response": "again"}', "b.jsonl:2: demonstration 'x1' repeats .*a.jsonl:1"),
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


def test_the_committed_demonstrations_match_their_card(real_vectors, monkeypatch):
    monkeypatch.setattr(EMBED, looked_up(real_vectors))  # the curation's vectors, encoded once
    assert demonstrations.main(["--check"]) == 0
