import asyncio
import math

import pytest

from argen.config import JudgeConfig
from argen.judges.base import JudgeFailure
from argen.judges.local import LocalJudge
from argen.judges.openai import OpenAIJudge
from argen.rewards import JudgeRewards
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
