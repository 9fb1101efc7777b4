"""One judge-failure policy (`judge.max_failure_rate`) for evaluation, validation and rewards.

The judge is the openai backend over real HTTP; the test server spoils the answers for chosen
prompts, so a known share of judgements fails.
"""

import json

import pytest

from argen.errors import JudgeOutage
from argen.evaluation.evaluate import read_scenarios
from argen.judging.openai import OpenAIJudge
from argen.judging.scoring import check_failures, check_so_far, reward_check_due, wilson_lower
from argen.training.validation import ValidationCallback
from tests.tiny_models import tiny_model
from tests.training.test_train import split_file, tiny

CHEST, CUT = "crushing chest pain", "small cut"  # two of the four prompts of `split_file`


@pytest.fixture(autouse=True)
def clean(server, monkeypatch):
    server.reset()
    monkeypatch.setenv("ARGEN_TEST_KEY", "k")


def judge_overrides(server, limit: float) -> list[str]:
    return [
        "judge.backend=openai",
        f"judge.base_url={server.base_url}",
        "judge.api_key_env=ARGEN_TEST_KEY",
        "judge.mode=combined",
        "judge.invalid_retries=0",
        "judge.cache=false",
        f"judge.max_failure_rate={limit}",
    ]


def test_the_policy_names_the_rate_the_limit_and_the_first_error():
    check_failures(1, 20, 0.05, "x", "boom")  # 5% is within 5%
    with pytest.raises(JudgeOutage, match=r"judging x failed for 9\.5% of 21 items \(2 failed\), "):
        check_failures(2, 21, 0.05, "x", "boom")
    with pytest.raises(JudgeOutage, match=r"over the limit of 5\.0% .*; first error: boom"):
        check_failures(2, 21, 0.05, "x", "boom")
    with pytest.raises(JudgeOutage, match=r"100\.0% of 1 items \(1 failed; the judge failed"):
        check_failures(1, 1, 0.0, "x", "boom")


def test_rewards_are_checked_once_one_failure_is_within_the_limit():
    assert not reward_check_due(1, 19, 0.05) and reward_check_due(1, 20, 0.05)
    assert reward_check_due(3, 3, 0.05)  # every judgement failed: no need to wait
    assert reward_check_due(0, 1, 0.0) and reward_check_due(1, 4, 0.25)


@pytest.fixture(scope="module")
def policy():
    """A tiny random Llama: the policy's answers do not matter here, the judge's failures do."""
    return tiny_model("llama-3.2-1b")


def validator(server, tmp_path, policy, limit: float) -> ValidationCallback:
    config = tiny(tmp_path, "train.validation_prompts=4", *judge_overrides(server, limit))
    frame = read_scenarios(split_file(tmp_path / "val.parquet", "validation"))
    _, tokenizer = policy
    return ValidationCallback(config, OpenAIJudge(config.judge), frame, tokenizer, tmp_path / "b")


def test_a_validation_pass_over_the_limit_stops_before_choosing(server, tmp_path, policy):
    server.spoil_when = (CHEST,)
    check = validator(server, tmp_path, policy, limit=0.05)
    with pytest.raises(JudgeOutage, match=r"validation, step 3 failed for 25\.0% of 4 items"):
        check.validate(policy[0], 3)
    assert check.history == [] and not check.history_file.exists()
    assert not (tmp_path / "b").exists()  # no adapter chosen from 3 of 4 items
    assert len(server.requests) == 4


def test_a_validation_pass_within_the_limit_is_recorded(server, tmp_path, policy):
    server.spoil_when = (CHEST,)
    check = validator(server, tmp_path, policy, limit=0.3)
    record = check.validate(policy[0], 0)  # step 0: a reference, so no model is saved
    assert record["n"] == 4 and record["judge_failures"] == 1
    saved = json.loads(check.history_file.read_text())
    assert [(h["step"], h["judge_failures"]) for h in saved] == [(0, 1)]
    assert len(server.requests) == 4


@pytest.mark.slow
def test_training_with_too_many_reward_failures_stops(server, tmp_path, default_model_dir):
    """Half the training prompts get no judgement (validation's two prompts are fine): the run
    stops at step 1 or 2 with the rate, and leaves no adapter."""
    server.spoil_when = (CHEST, CUT)
    config = tiny(tmp_path, *judge_overrides(server, limit=0.3))
    from argen.training.train import train

    with pytest.raises(JudgeOutage, match=r"training rewards .* of [48] items .* limit of 30\.0%"):
        train(
            config,
            default_model_dir,
            split_file(tmp_path / "train.parquet", "train"),
            split_file(tmp_path / "val.parquet", "validation"),
            tmp_path / "adapter",
        )
    assert not (tmp_path / "adapter").exists()


def rows(failed: int, ok: int) -> list[dict]:
    return [{"judge_ok": False, "judge_error": "boom"}] * failed + [
        {"judge_ok": True, "judge_error": None}
    ] * ok


def test_a_stage_stops_early_only_when_the_verdict_is_clear():
    check_so_far(rows(3, 13), 200, 0.05, "x")  # 19% of 16: not clearly over 5% yet
    with pytest.raises(JudgeOutage, match=r"x stopped early: 4 of the first 16 of 200"):
        check_so_far(rows(4, 12), 200, 0.05, "x")  # 25% of 16: its 3-sigma bound is over 5%
    with pytest.raises(JudgeOutage, match=r"stopped early: 11 of the first 80 of 200"):
        check_so_far(rows(11, 69), 200, 0.05, "x")  # more than 5% of all 200 already failed
    check_so_far(rows(2, 2), 200, 0.05, "x")  # too few judgements to tell
    check_so_far(rows(1, 0), 1, 0.0, "x")  # finished: the final check decides


def test_the_wilson_bound_is_below_the_observed_rate():
    assert 0 < wilson_lower(4, 16) < 0.25 and wilson_lower(0, 16) == pytest.approx(0, abs=1e-12)
    assert wilson_lower(16, 16) == pytest.approx(0.64)
