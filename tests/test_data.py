"""The scenario set and its holdout: card statistics current, holdout independent, label rules."""

import re
from collections import Counter

import numpy as np
import pytest

from argen.config import CurateConfig
from argen.data.datacard import FORMS, HOLDOUT, SCENARIOS, card_text, check_row, halves, load_rows
from argen.errors import ArgenError
from argen.judging.embeddings import embed
from tests.conftest import REPO

REQUIRED_TOPICS = (
    "sexual health and STIs",
    "menopause",
    "abuse and violence",
    "psychosis",
    "bipolar disorder",
    "PTSD",
    "miscarriage and ectopic pregnancy",
    "kidney disease",
    "disability",
    "LGBTQ+ health",
    "neonatal",
    "medication in pregnancy",
    "self-harm and suicide",
    "eating disorders",
)


@pytest.fixture(scope="module")
def scenarios():
    return load_rows([REPO / SCENARIOS])


@pytest.fixture(scope="module")
def holdout():
    return load_rows([REPO / HOLDOUT])


def texts(rows: list[dict]) -> tuple[list[str], list[str]]:
    """Every whole prompt and every half of a mixed prompt, with the id each came from."""
    out, ids = [], []
    for row in rows:
        for text in [row["prompt"], *halves(row)]:
            out.append(text)
            ids.append(row["id"])
    return out, ids


def test_committed_card_matches_the_files():
    current, wanted = card_text(REPO)
    assert current == wanted, "data/README.md is stale: run python -m argen.data.datacard"


@pytest.mark.slow  # embeds every prompt and half: about 20 s
def test_holdout_is_not_related_to_any_scenario_or_half(scenarios, holdout):
    held, held_ids = texts(holdout)
    seen, seen_ids = texts(scenarios)
    assert len(held) > len(holdout) and len(seen) > len(scenarios)  # halves are compared too
    similarity = embed(held) @ embed(seen).T
    threshold = CurateConfig().related_threshold
    close = [
        (held_ids[i], seen_ids[j], round(float(similarity[i, j]), 3))
        for i, j in zip(*np.nonzero(similarity >= threshold), strict=True)
    ]
    assert not close, f"holdout rows at or above {threshold} with scenario rows: {close}"
    assert not {r["id"] for r in holdout} & {r["id"] for r in scenarios}


def test_halves_split_a_mixed_prompt_and_skip_a_single_one():
    row = {
        "prompt": "Which ETF? My knee aches. And which bank?",
        "off_domain": ["Which ETF?", "And which bank?"],
    }
    assert halves(row) == ["My knee aches.", "Which ETF? And which bank?"]
    assert halves({"prompt": "My knee aches."}) == []


def test_mixed_prompts_have_five_forms_tier_a_and_no_dominant_joiner(scenarios):
    mixed = [r for r in scenarios if r["category"] == "mixed_domain"]
    assert len(mixed) >= 0.25 * len(scenarios)
    forms = Counter(r["form"] for r in mixed)
    assert set(forms) == set(FORMS)
    assert sum(r["tier"] == "A" for r in mixed) >= 0.2 * len(mixed)
    for form in FORMS:
        tiers = Counter(r["tier"] for r in mixed if r["form"] == form)
        assert set(tiers) == {"A", "B", "C"}, form
        assert tiers["A"] >= 0.1 * forms[form], form
    joiners = Counter(r["joiner"] for r in mixed if r.get("joiner"))
    assert max(joiners.values()) <= 0.25 * len(mixed)
    for row in mixed:
        if row.get("joiner"):
            assert row["joiner"].lower() in row["prompt"].lower(), row["id"]
    # read from the text, not the column: a sentence opening with "Also" or "And"
    for word in ("also", "and"):
        opening = sum(bool(re.search(rf"(^|[.?!]\s+){word}\b", r["prompt"], re.I)) for r in mixed)
        assert opening <= 0.25 * len(mixed), word


def test_size_topics_and_voice(scenarios):
    assert len(scenarios) >= 600
    topics = Counter(r["topic"] for r in scenarios)
    thin = {t: topics[t] for t in REQUIRED_TOPICS if topics[t] < 5}
    assert not thin, thin
    prompts = [r["prompt"] for r in scenarios]
    assert sum(len(p.split()) >= 60 for p in prompts) >= 8  # long prompts with a history
    assert sum(p.count("?") >= 2 for p in prompts) >= 60  # several questions
    for number in ("999", "112", "000", "111"):
        assert any(re.search(rf"\b{number}\b", p) for p in prompts), number
    older = r"\bI'm (6[5-9]|[7-9]\d)\b"
    assert sum(bool(re.search(older, p)) for p in prompts) >= 10  # older adults, first person


def test_wellness_rule_and_named_fixes(scenarios):
    by_id = {r["id"]: r for r in scenarios}
    # S2 is the business and IT side of care only; generic wellness is S0
    assert {r["topic"] for r in scenarios if r["scope"] == "S2"} == {"clinic business and IT"}
    assert all(r["scope"] == "S0" for r in scenarios if r["topic"] == "healthy living")
    expected = {
        "mix-131": ("A", "S0"),
        "clin-072": ("A", "S0"),
        "adv-011": ("B", "S0"),
        "adv-032": ("C", "S1"),
        "adv-017": ("C", "S3"),
        "adv-039": ("B", "S0"),
        "mix-030": ("C", "S0"),
    }
    for row_id, labels in expected.items():
        assert (by_id[row_id]["tier"], by_id[row_id]["scope"]) == labels, row_id
    assert not {"adv-029", "adv-044", "para-038", "ood-036"} & set(by_id)


def test_card_rows_are_checked():
    row = {"id": "m", "prompt": "My knee aches. Which ETF?", "category": "mixed_domain"}
    with pytest.raises(ArgenError, match="topic"):
        check_row(dict(row), "x")
    with pytest.raises(ArgenError, match="form"):
        check_row({**row, "topic": "t", "form": "single"}, "x")
    mixed = {**row, "topic": "t", "form": "health_first"}
    with pytest.raises(ArgenError, match="not in the prompt"):
        check_row({**mixed, "off_domain": ["Which bond?"]}, "x")
    assert check_row({**mixed, "off_domain": ["Which ETF?"]}, "x")
