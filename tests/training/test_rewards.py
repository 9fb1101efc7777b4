import asyncio
import math

import pytest

from argen.config import JudgeConfig
from argen.errors import JudgeOutage
from argen.judging import rubric
from argen.judging.base import JudgeFailure
from argen.judging.local import LocalJudge
from argen.judging.openai import OpenAIJudge
from argen.training.rewards import JudgeRewards, reward_weights
from tests.fake_openai import FakeOpenAI

PROMPTS = [
    [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "My knee hurts. Which stocks should I buy?"},
    ]
] * 2
COMPLETIONS = [
    [
        {
            "role": "assistant",
            "content": "Rest and ice it; see a doctor if it persists. "
            "I can't help with investments.",
        }
    ],
    [{"role": "assistant", "content": "Buy Nvidia stocks and an index fund."}],
]


class Counting:
    """Wraps a backend and counts its calls; optionally fails one item."""

    def __init__(self, inner, fail_index=None):
        self.inner, self.fail_index, self.calls = inner, fail_index, 0
        self.name, self.identity = inner.name, inner.identity

    async def judge_many(self, pairs):
        self.calls += 1
        results = await self.inner.judge_many(pairs)
        if self.fail_index is not None:
            results[self.fail_index] = JudgeFailure("boom")
        return results


def call_all(funcs, metrics, **extra):
    """Call the reward functions concurrently, as TRL does for async ones."""
    kwargs = dict(
        prompts=PROMPTS,
        completions=COMPLETIONS,
        completion_ids=[[1], [2]],
        tier=["B", "B"],
        scope=["S0", "S0"],
        log_metric=lambda k, v: metrics.append((k, v)),
        trainer_state=None,
        **extra,
    )

    async def gather():
        return await asyncio.gather(*(f(**kwargs) for f in funcs))

    return asyncio.run(gather())


def test_three_rewards_share_one_judging_pass():
    backend = Counting(LocalJudge())
    rewards = JudgeRewards(backend)
    funcs = rewards.functions()
    assert [f.__name__ for f in funcs] == ["ahimsa", "dharma", "helpfulness"]
    metrics = []
    ahimsa, dharma, helpfulness = call_all(funcs, metrics)
    assert backend.calls == 1
    assert dharma[0] > dharma[1]
    assert all(0 <= x <= 1 for x in ahimsa + dharma + helpfulness)
    assert metrics == [("judge_failures", 0)]


def test_penalties_add_a_gaming_reward_weighted_one():
    rewards = JudgeRewards(
        LocalJudge(), penalties={"echoes_system_prompt": 0.5, "refers_tier_c": 0}
    )
    funcs = rewards.functions()
    assert [f.__name__ for f in funcs] == ["ahimsa", "dharma", "helpfulness", "gaming"]
    assert reward_weights(rubric.DEFAULT_WEIGHTS, rewards.penalties)[-1] == 1.0
    echo = [{"role": "assistant", "content": "Stay in your domain: if a message also asks"}]
    gaming = funcs[-1](
        prompts=PROMPTS,
        completions=[COMPLETIONS[0], echo],
        tier=["C"] * 2,
        scope=["S0"] * 2,
        category=["mixed_domain"] * 2,
    )
    assert gaming == [0.0, -0.5]  # the referral in a tier C answer costs nothing at weight 0
    assert len(reward_weights(rubric.DEFAULT_WEIGHTS, {"refers_tier_c": 0.0})) == 3


def test_failed_judgement_gives_none_and_is_counted():
    rewards = JudgeRewards(Counting(LocalJudge(), fail_index=1))
    metrics = []
    results = call_all(rewards.functions(), metrics)
    assert all(r[1] is None for r in results)
    assert all(r[0] is not None and not math.isnan(r[0]) for r in results)
    assert metrics == [("judge_failures", 1)]
    assert rewards.failures == 1


@pytest.fixture
def fake_server(monkeypatch):
    monkeypatch.setenv("ARGEN_TEST_KEY", "k")
    with FakeOpenAI() as server:
        yield server


def test_openai_rewards_make_no_triple_requests(fake_server):
    judge = OpenAIJudge(
        JudgeConfig(
            backend="openai", model="m", base_url=fake_server.base_url, api_key_env="ARGEN_TEST_KEY"
        )
    )
    call_all(JudgeRewards(judge).functions(), [])
    assert len(fake_server.requests) == 2 * 3  # two completions x three dimension requests


class Scripted:
    """A backend with fixed valid judgements, failing every item whose response says FAIL."""

    name, identity = "scripted", {"backend": "scripted"}

    async def judge_many(self, pairs):
        fields = {
            "harm_avoidance": 0.9,
            "safety_context": 0.9,
            "referral_strength": "routine",
            "has_professional_referral": True,
            "has_medical_disclaimer": False,
            "severity": "none",
            "domain_adherence": 0.9,
            "response_scope": "S0",
            "out_of_domain_advice": False,
            "clarity": 0.9,
            "completeness": 0.9,
            "relevance": 0.9,
            "empathy": 0.9,
        }
        return [JudgeFailure(f"no answer for {r}") if "FAIL" in r else fields for _, r in pairs]


def step(rewards, *responses):
    """One GRPO step's reward call on the given completions (all three functions at once)."""
    n = len(responses)
    kwargs = dict(prompts=["q"] * n, completions=list(responses), tier=["B"] * n, scope=["S0"] * n)

    async def gather():
        return await asyncio.gather(*(f(**kwargs) for f in rewards.functions()))

    return asyncio.run(gather())


def test_reward_failures_over_the_limit_stop_training_once_enough_are_judged():
    rewards = JudgeRewards(Scripted(), max_failure_rate=0.25)  # checked from 4 judgements
    ahimsa = step(rewards, "ok", "FAIL 1", "ok")[0]  # 1 of 3 failed: not a rate yet
    assert ahimsa[1] is None and ahimsa[0] == ahimsa[2] == pytest.approx(0.9)
    with pytest.raises(JudgeOutage, match=r"training rewards .* 40\.0% of 5 items .*25\.0%") as e:
        step(rewards, "FAIL 2", "ok")
    assert "first error: no answer for FAIL 1" in str(e.value)


def test_reward_failures_within_the_limit_continue():
    rewards = JudgeRewards(Scripted(), max_failure_rate=0.25)
    for k in range(5):
        scores = step(rewards, "FAIL" if k == 2 else "ok", "ok", "ok", "ok")
        assert len(scores[0]) == 4
    assert (rewards.judged, rewards.failures) == (20, 1)  # 5%, under 25%


def test_one_early_failure_is_not_a_rate():
    rewards = JudgeRewards(Scripted())  # 5%: checked from 20 judgements on
    step(rewards, "FAIL", "ok", "ok", "ok")  # 25% of 4, too few to be a rate yet
    for _ in range(4):
        step(rewards, "ok", "ok", "ok", "ok")
    with pytest.raises(JudgeOutage, match=r"failed for 8\.3% of 24 items \(2 failed\)"):
        step(rewards, "FAIL", "ok", "ok", "ok")


def test_every_reward_failing_stops_at_the_first_step():
    rewards = JudgeRewards(Scripted())
    with pytest.raises(JudgeOutage, match="100.0% of 2 items .*failed on all of them"):
        step(rewards, "FAIL a", "FAIL b")
