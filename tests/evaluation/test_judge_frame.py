"""Judging an evaluation's responses: a dead judge stops the stage after one round of
requests, not after every item was tried."""

import asyncio
import logging
import threading
import time

import pandas as pd
import pytest

from argen.config import load_config
from argen.errors import JudgeOutage
from argen.evaluation import evaluate as evaluate_module
from argen.evaluation.scoring import FIRST_CHUNK, judge_frame
from argen.generation.generate import Generated
from argen.judging.base import JudgeFailure
from tests.conftest import scenario, write_scenarios
from tests.judging.test_cache import VALID


class DeadJudge:
    """Every judgement fails, as a judge behind a wrong URL would after its retries."""

    name = "test/dead"
    identity = {"backend": "dead"}

    def __init__(self):
        self.asked = 0

    async def judge_many(self, pairs):
        self.asked += len(pairs)
        return [JudgeFailure("APIConnectionError: Connection error.") for _ in pairs]


def answered(n: int) -> pd.DataFrame:
    rows = [scenario(f"s{i}", f"question {i}?") for i in range(n)]
    return pd.DataFrame(rows).assign(response=[f"answer {i}" for i in range(n)])


def test_a_dead_judge_stops_the_evaluation_after_the_first_round():
    judge = DeadJudge()
    config = load_config("default", ["judge.cache=false"])
    started = time.perf_counter()
    with pytest.raises(JudgeOutage, match=r"stopped early: 16 of the first 16 of 500 judgements"):
        judge_frame(config, judge, answered(500), "baseline")
    assert judge.asked == FIRST_CHUNK == 16  # not 500
    assert time.perf_counter() - started < 30


def test_an_evaluation_whose_every_judgement_failed_logs_without_error(
    tmp_path, monkeypatch, caplog
):
    """With judge.max_failure_rate=1 nothing stops it; its last line has no mean to show."""
    answer = Generated("rest it", 3, 2, False, 0.01)
    monkeypatch.setattr(evaluate_module, "check_model_dir", lambda path: path)
    monkeypatch.setattr(evaluate_module, "load_model", lambda path, precision: (None, None))
    monkeypatch.setattr(evaluate_module, "generate", lambda m, t, p, s, cb: [answer] * len(p))
    monkeypatch.setattr(evaluate_module, "make_backend", lambda config: DeadJudge())
    scenarios = write_scenarios(tmp_path / "s.parquet", [scenario("a", "What is a fever?")])
    config = load_config("default", ["judge.cache=false", "judge.max_failure_rate=1"])
    with caplog.at_level(logging.INFO, logger="argen"):
        evaluate_module.evaluate(config, tmp_path, scenarios, tmp_path / "out", "baseline")
    assert "combined n/a (no judgement succeeded)" in caplog.text
    assert "Logging error" not in caplog.text


class SlowJudge:
    """Answers every pair with valid fields after a pause, counting what it was asked."""

    name = "test/slow"
    identity = {"backend": "slow"}

    def __init__(self):
        self.asked = 0
        self.lock = threading.Lock()

    async def judge_many(self, pairs):
        with self.lock:
            self.asked += len(pairs)
        await asyncio.sleep(0.2)
        return [dict(VALID) for _ in pairs]


def test_two_identical_evaluations_at_once_ask_the_judge_once(tmp_path):
    judge = SlowJudge()
    config = load_config("default", [f"storage.root={tmp_path}"])
    frame = answered(40)
    results = []
    runs = [
        threading.Thread(target=lambda: results.append(judge_frame(config, judge, frame, "x")))
        for _ in range(2)
    ]
    for run in runs:
        run.start()
    for run in runs:
        run.join(60)
    assert len(results) == 2 and results[0] == results[1]
    assert judge.asked == 40  # not 80: the second waited for the first's judgements
