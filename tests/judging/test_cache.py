import asyncio
import json
import math
import sqlite3
import threading
from concurrent.futures import ProcessPoolExecutor
from contextlib import closing

import pytest

from argen.errors import ArgenError
from argen.judging.base import JudgeItem, score_items
from argen.judging.cache import JudgementCache, cache_key

IDENTITY = {"backend": "openai", "model": "m", "base_url": "http://x/v1", "rubric_version": "r1"}


def test_key_depends_on_every_part():
    base = cache_key(IDENTITY, "p", "r")
    assert cache_key(IDENTITY, "p", "r") == base
    assert cache_key(IDENTITY | {"model": "m2"}, "p", "r") != base
    assert cache_key(IDENTITY | {"base_url": "http://y/v1"}, "p", "r") != base
    assert cache_key(IDENTITY | {"rubric_version": "r2"}, "p", "r") != base
    assert cache_key(IDENTITY, "p2", "r") != base
    assert cache_key(IDENTITY, "p", "r2") != base


def test_round_trip_and_persistence(tmp_path):
    path = tmp_path / "c.sqlite"
    JudgementCache(path).put_many("j", {"k1": {"a": 1.0}, "k2": {"a": 0.5}})
    reopened = JudgementCache(path)
    assert reopened.get_many(["k1", "k2", "k3"]) == {"k1": {"a": 1.0}, "k2": {"a": 0.5}}
    assert len(reopened) == 2


def _write(args):
    path, worker = args
    cache = JudgementCache(path)
    for batch in range(20):
        cache.put_many("j", {f"w{worker}-{batch}-{i}": {"v": i} for i in range(10)})
    return worker


def test_concurrent_writers_lose_nothing(tmp_path):
    path = tmp_path / "c.sqlite"
    JudgementCache(path)
    with ProcessPoolExecutor(max_workers=4) as pool:
        list(pool.map(_write, [(path, w) for w in range(4)]))
    assert len(JudgementCache(path)) == 4 * 20 * 10


class CountingJudge:
    """A backend that answers every pair with the same valid fields and counts the pairs."""

    name = "test/counting"
    identity = {"backend": "test"}

    def __init__(self, answer=None):
        self.answer = answer or VALID
        self.asked = 0

    async def judge_many(self, pairs):
        self.asked += len(pairs)
        return [dict(self.answer) for _ in pairs]


VALID = dict(
    harm_avoidance=0.8,
    safety_context=0.6,
    referral_strength="routine",
    has_professional_referral=True,
    has_medical_disclaimer=False,
    severity="none",
    domain_adherence=0.9,
    response_scope="S0",
    out_of_domain_advice=False,
    clarity=0.8,
    completeness=0.6,
    relevance=1.0,
    empathy=0.4,
)
ITEM = JudgeItem("s1", "my knee hurts", "rest it", "C", "S0")


@pytest.mark.parametrize(
    "tamper",
    [
        json.dumps(VALID | {"harm_avoidance": 7.0, "safety_context": 7.0}),
        json.dumps(VALID | {"domain_adherence": -5.0}),
        json.dumps(VALID | {"referral_strength": "extreme"}),
        json.dumps({"harm_avoidance": 0.5}),
        "{not json",
    ],
)
def test_an_invalid_cached_judgement_is_a_miss_and_judged_again(tmp_path, tamper):
    cache = JudgementCache(tmp_path / "c.sqlite")
    judge = CountingJudge()
    first = asyncio.run(score_items(judge, [ITEM], cache=cache))
    assert judge.asked == 1
    with closing(sqlite3.connect(cache.path)) as db, db:
        db.execute("UPDATE judgements SET raw = ?", (tamper,))
    again = asyncio.run(score_items(judge, [ITEM], cache=cache))
    assert judge.asked == 2  # the damaged row was not believed
    assert again[0]["ahimsa"] == first[0]["ahimsa"] == pytest.approx(0.7)
    assert asyncio.run(score_items(judge, [ITEM], cache=cache))[0]["dharma"] == 0.9
    assert judge.asked == 2  # and the fresh judgement replaced it


def test_an_invalid_fresh_judgement_is_a_failure_not_a_score(tmp_path):
    cache = JudgementCache(tmp_path / "c.sqlite")
    judge = CountingJudge(VALID | {"clarity": 3.0})
    (row,) = asyncio.run(score_items(judge, [ITEM], cache=cache))
    assert not row["judge_ok"] and math.isnan(row["helpfulness"])
    assert "clarity is not a number in [0, 1] (got 3.0)" in row["judge_error"]
    assert len(cache) == 0  # a failure is never cached


def test_a_damaged_cache_file_is_an_error_naming_it(tmp_path):
    path = tmp_path / "c.sqlite"
    path.write_bytes(b"not a database " * 100)
    with pytest.raises(ArgenError, match=f"the judge cache {path} is damaged"):
        JudgementCache(path)


def test_processes_opening_a_new_cache_at_once_wait_for_each_other(tmp_path):
    """Training ranks open the same new cache together; one switching it to WAL made another's
    open fail with 'database is locked', which read as a damaged cache (a CI failure)."""
    path = tmp_path / "cache.sqlite"
    errors: list[str] = []

    def open_cache() -> None:
        try:
            JudgementCache(path)
        except Exception as exc:  # any failure is the finding
            errors.append(repr(exc))

    for _ in range(60):
        for leftover in tmp_path.glob("cache.sqlite*"):
            leftover.unlink()
        threads = [threading.Thread(target=open_cache) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert errors == []
