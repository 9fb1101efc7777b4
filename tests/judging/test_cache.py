from concurrent.futures import ProcessPoolExecutor

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
