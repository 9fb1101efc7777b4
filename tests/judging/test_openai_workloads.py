"""The openai judge on real workloads over real HTTP: many chunks, several event loops, no retry.

Each judging call of an evaluation runs in its own ``asyncio.run``; validation runs in another;
TRL awaits async rewards on its own loop in a daemon thread. One judge serves all of them, so
its connections must never outlive the loop they were opened on. Every test asserts the exact
number of requests the server saw and that none was a client retry (``x-stainless-retry-count``
is 0 on every request): a retry or a re-ask would hide a broken connection.
"""

import asyncio
import json

import pandas as pd
import pytest
from trl.trainer.utils import shutdown_event_loop_in_daemon, start_event_loop_in_daemon

from argen.config import load_config
from argen.evaluation.scoring import JUDGE_CHUNK, judge_frame
from argen.judging.openai import OpenAIJudge
from argen.training.rewards import JudgeRewards

KEY = "sk-workload-test-key"


@pytest.fixture(autouse=True)
def clean(server, monkeypatch):
    server.reset()
    monkeypatch.setenv("ARGEN_TEST_KEY", KEY)


def overrides(server, tmp_path, *extra) -> list[str]:
    return [
        f"storage.root={tmp_path / 'art'}",
        "judge.backend=openai",
        "judge.model=fake-judge",
        f"judge.base_url={server.base_url}",
        "judge.api_key_env=ARGEN_TEST_KEY",
        "judge.max_retries=2",  # retries allowed, so that the assertions below would see them
        "judge.cache=false",
        *extra,
    ]


def frame(n: int, tag: str = "") -> pd.DataFrame:
    """`n` distinct generated answers with the scenario columns judging needs."""
    return pd.DataFrame(
        {
            "id": [f"s{k}" for k in range(n)],
            "prompt": [f"My knee hurts ({k}). Which stocks should I buy?" for k in range(n)],
            "response": [f"Rest the knee {k}{tag}; see a doctor if it lasts." for k in range(n)],
            "tier": ["B"] * n,
            "scope": ["S0"] * n,
        }
    )


def assert_no_retries(server, expected: int) -> None:
    """Exactly `expected` requests reached the server, and none was a client retry."""
    retries = [r["headers"].get("x-stainless-retry-count") for r in server.requests]
    assert len(retries) == expected
    assert set(retries) == {"0"}


def test_evaluation_of_200_items_over_several_chunks(server, tmp_path):
    config = load_config("default", overrides(server, tmp_path))
    judge = OpenAIJudge(config.judge)
    n = 200
    assert n > 3 * JUDGE_CHUNK  # four chunks, each in its own asyncio.run
    rows = judge_frame(config, judge, frame(n), "baseline")
    assert [r["id"] for r in rows] == [f"s{k}" for k in range(n)]
    assert all(r["judge_ok"] for r in rows), {r["judge_error"] for r in rows}
    assert_no_retries(server, 3 * n)  # one request per dimension per item


def test_rewards_on_trl_loop_after_validation(server, tmp_path):
    config = load_config("default", overrides(server, tmp_path, "judge.mode=combined"))
    judge = OpenAIJudge(config.judge)
    validation = judge_frame(config, judge, frame(8), "validation, step 0")
    assert all(r["judge_ok"] for r in validation)
    rewards = JudgeRewards(judge)
    thread, loop, ready = start_event_loop_in_daemon("trl-rewards")
    ready.wait()
    try:
        for step in range(3):  # GRPO steps, then another validation pass between them
            batch = frame(4, tag=f" step {step}")
            kwargs = dict(
                prompts=batch["prompt"].tolist(),
                completions=batch["response"].tolist(),
                tier=batch["tier"].tolist(),
                scope=batch["scope"].tolist(),
            )

            async def all_rewards(kwargs=kwargs):
                return await asyncio.gather(*(f(**kwargs) for f in rewards.functions()))

            scores = asyncio.run_coroutine_threadsafe(all_rewards(), loop).result(timeout=60)
            assert all(s is not None for dim in scores for s in dim)
            again = judge_frame(config, judge, frame(8, tag=f" v{step}"), "validation")
            assert all(r["judge_ok"] for r in again)
    finally:
        shutdown_event_loop_in_daemon(thread, loop)
    assert rewards.judged == 12 and rewards.failures == 0
    assert_no_retries(server, 8 + 3 * (4 + 8))  # combined mode: one request per item


def test_an_exception_that_is_not_an_api_error_propagates(server, tmp_path, monkeypatch):
    config = load_config("default", overrides(server, tmp_path))
    judge = OpenAIJudge(config.judge)

    async def broken(**_):
        raise RuntimeError("a bug in the client, not a judge fault")

    monkeypatch.setattr(judge.client.chat.completions, "create", broken)
    with pytest.raises(RuntimeError, match="a bug in the client"):
        judge_frame(config, judge, frame(3), "baseline")
    assert server.requests == []


def test_close_releases_the_loop_thread(server, tmp_path):
    config = load_config("default", overrides(server, tmp_path, "judge.mode=combined"))
    judge = OpenAIJudge(config.judge)
    assert all(r["judge_ok"] for r in judge_frame(config, judge, frame(2), "x"))
    thread = judge._runner._thread
    assert thread is not None and thread.is_alive()
    judge.close()
    assert not thread.is_alive()
    assert_no_retries(server, 2)


@pytest.mark.slow
def test_short_training_run_with_the_openai_judge(server, tmp_path, default_model_dir):
    """Validation (its own asyncio.run), then GRPO rewards on TRL's loop, then validation again:
    the sequence that used to fail at the first step after validation. One of the four training
    prompts gets no judgement (25% of rewards, within a 50% limit): the run goes on."""
    from argen.training.train import train
    from tests.training.test_train import split_file, tiny

    server.spoil_when = ("crushing chest pain",)  # a training prompt, not a validation one
    extra = ["judge.mode=combined", "judge.invalid_retries=0", "judge.max_failure_rate=0.5"]
    config = tiny(tmp_path, *overrides(server, tmp_path, *extra)[1:])
    out = train(
        config,
        default_model_dir,
        split_file(tmp_path / "train.parquet", "train"),
        split_file(tmp_path / "val.parquet", "validation"),
        tmp_path / "adapter",
    )
    manifest = json.loads((out / "manifest.json").read_text())
    validation = pd.read_parquet(out / "validation_log.parquet")
    assert manifest["steps"] == 2 and validation["step"].tolist() == [0, 1, 2]
    assert manifest["judge"] == {"judged": 8, "failures": 2}  # 2 steps x 2 prompts x 2
    assert validation["n"].tolist() == [2, 2, 2] and validation["judge_failures"].sum() == 0
    assert_no_retries(server, 8 + 6)  # combined mode, no cache: one request per judgement
