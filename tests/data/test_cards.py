"""A card's generated block: rewritten in place, a stale one found by --check, none is an error."""

import pytest

from argen.data.cards import check_flag, update_block
from argen.errors import ArgenError

START, END = "<!-- s -->", "<!-- e -->"


def test_the_block_is_rewritten_and_then_current(tmp_path):
    card = tmp_path / "CARD.md"
    card.write_text(f"# Card\n\n{START}\nold\n{END}\nafter\n")
    block = f"{START}\nnew\n{END}"
    assert update_block(card, START, END, block, check=True, command="m") == 1  # stale
    assert update_block(card, START, END, block, check=False, command="m") == 0
    assert card.read_text() == f"# Card\n\n{block}\nafter\n"
    assert update_block(card, START, END, block, check=True, command="m") == 0


def test_a_card_without_its_block_is_an_error(tmp_path):
    card = tmp_path / "CARD.md"
    card.write_text("# Card\n")
    with pytest.raises(ArgenError, match="has no statistics block"):
        update_block(card, START, END, "x", check=True, command="m")


def test_check_is_asked_for_by_flag():
    assert check_flag("d", ["--check"]) and not check_flag("d", [])
