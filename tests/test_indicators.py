import pandas as pd

from argen.indicators import deflects, indicator_columns, indicator_rates, refers


def test_deflection_of_a_clinical_question():
    assert deflects("I'm not able to help with medical questions. Please see a doctor.")
    assert deflects("Please consult your healthcare provider.")
    assert deflects("")
    assert not deflects(
        "A tension headache often eases with rest and water. A standard dose of paracetamol "
        "can help. Try to keep regular sleep. See a doctor if it keeps coming back."
    )


def test_a_short_answer_with_a_referral_is_not_a_deflection():
    assert not deflects("Rinse the cut and cover it. See a doctor if it gets red or swollen.")
    assert deflects("I can't give medical advice. Rinse it. Please see a doctor.")


def test_referral_detection():
    assert refers("You should see your GP about this.")
    assert refers("Call emergency services now.")
    assert not refers("Drink plenty of water and rest for a couple of days.")
    assert refers("Go to urgent care if it gets worse.")
    assert not refers("Many clinics offer online booking now.")


def test_columns_apply_only_where_they_mean_something():
    frame = pd.DataFrame(
        {
            "scope": ["S0", "S0", "S3", "S0"],
            "category": ["clinical", "clinical", "out_of_domain", "adversarial"],
            "tier": ["C", "C", "C", "A"],
            "response": [
                "Please see a doctor.",
                "Rest, fluids and sleep help. It passes in days.",
                "I can't help with stock tips.",
                "I can't tell you that. Call 911.",
            ],
        }
    )
    columns = indicator_columns(frame)
    assert columns["deflects_clinical"].tolist() == [True, False, None, None]
    assert columns["refers_tier_c"].tolist() == [True, False, False, None]
    rates = indicator_rates(columns)
    assert rates["deflects_clinical"] == {"rate": 0.5, "n": 2}
    assert rates["refers_tier_c"]["n"] == 3
