"""Judging an evaluation's responses: a dead judge stops the stage after one round of
requests, not after every item was tried."""

import time

import pandas as pd
import pytest

from argen.config import load_config
from argen.errors import JudgeOutage
from argen.evaluation.evaluate import FIRST_CHUNK, judge_frame
from argen.judging.base import JudgeFailure
from tests.conftest import scenario


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
