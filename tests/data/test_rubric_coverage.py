"""The committed rubrics cover every scenario and holdout row, and their card is current."""

from argen.data import rubrics


def test_every_scenario_has_a_rubric_and_the_card_is_current():
    assert rubrics.main(["--check"]) == 0


def test_every_labelled_verdict_list_matches_its_rubric():
    """A label's `criteria_met` has one verdict per criterion of its scenario's rubric, in order:
    a list of another length cannot be lined up with the criteria (the criterion head would
    learn from shifted verdicts)."""
    from argen.data.labels import read_labels

    rubric_of = rubrics.read_rubrics()
    labels = read_labels()
    graded = labels[labels["criteria_met"].notna()]
    wrong = [
        item
        for item, scenario, met in zip(
            graded["item"], graded["scenario"], graded["criteria_met"], strict=True
        )
        if scenario not in rubric_of or len(met) != len(rubric_of[scenario])
    ]
    assert len(graded) > 6000 and wrong == []
