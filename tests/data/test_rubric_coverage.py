"""The committed rubrics cover every scenario and holdout row, and their card is current."""

from argen.data import rubrics


def test_every_scenario_has_a_rubric_and_the_card_is_current():
    assert rubrics.main(["--check"]) == 0
