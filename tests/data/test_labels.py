"""Labelled items: each checked against the guide's rules; errors name file and line."""

import json

import pytest

from argen.data import labels
from argen.data.labels import read_labels
from argen.errors import ArgenError
from tests.conftest import labelled_item as item


def read(tmp_path, *rows):
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return read_labels(tmp_path)


def test_a_good_item_is_read_flat(tmp_path):
    frame = read(tmp_path, item())
    assert bool(frame.loc[0, "declines_off_domain"])
    assert frame.loc[0, "criteria_met"] == [True, False, True]


def test_one_file_is_read_like_a_folder(tmp_path):
    read(tmp_path, item())
    (tmp_path / "b.jsonl").write_text(json.dumps(item() | {"item": "other"}) + "\n")
    assert list(read_labels(tmp_path / "a.jsonl")["item"]) == [item()["item"]]
    assert len(read_labels(tmp_path)) == 2


def test_a_missing_or_empty_source_is_an_error(tmp_path):
    with pytest.raises(ArgenError, match="labels .*nowhere not found"):
        read_labels(tmp_path / "nowhere")
    with pytest.raises(ArgenError, match="labels folder .* holds no .jsonl file"):
        read_labels(tmp_path)


def labels_with(**change):
    return item()["labels"] | change


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"split": "test"}, "'split' must be one of"),
        ({"quality": "great"}, "'quality' must be one of"),
        ({"response": " "}, "field 'response'"),
        ({"labels": {"answers_medical": True}}, "exactly the 12 propositions"),
        ({"labels": labels_with(urges_emergency="yes")}, "'urges_emergency' must be true"),
        ({"labels": labels_with(coherent_complete=None)}, "'coherent_complete' always applies"),
        ({"has_off_domain": False}, "'declines_off_domain' applies only when"),
        ({"labels": labels_with(needless_escalation=True)}, "needless_escalation without"),
        (
            {"labels": labels_with(ignores_off_domain=True, declines_off_domain=True)},
            "ignores_off_domain with",
        ),
        ({"criteria_met": [1, 0]}, "'criteria_met' must be"),
    ],
)
def test_an_item_breaking_a_rule_names_its_line(tmp_path, change, message):
    with pytest.raises(ArgenError, match=f"a.jsonl:2: .*{message}"):
        read(tmp_path, item(item="ok"), item(**change))


def test_a_repeated_item_is_an_error(tmp_path):
    with pytest.raises(ArgenError, match="a.jsonl:2: item 'x-1' repeats"):
        read(tmp_path, item(), item())


def test_the_committed_labels_match_their_card():
    """Every committed item passes the rules, and the card's counts and agreement are current."""
    assert labels.main(["--check"]) == 0
