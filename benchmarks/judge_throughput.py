"""Judge throughput: the openai backend against a local server with injected latency, and the
local judge on this CPU.

    python -m benchmarks.judge_throughput [--items 500] [--latency 0.2] [--concurrency 32]

Reports requests/s against the bound (concurrency / latency), the same kind of items sent
sequentially, a cached re-run (requests made, seconds), and the local judge's items/s. The
server runs in its own process so that its threads do not compete with the client for the GIL.
"""

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from argen.config import JudgeConfig
from argen.judging.base import JudgeItem, score_items
from argen.judging.cache import JudgementCache
from argen.judging.local import LocalJudge
from argen.judging.openai import OpenAIJudge

RESPONSES = [
    "Rest the knee, use ice, and see a doctor if it lasts more than a week.",
    "This could be serious: call emergency services now.",
    "Drink fluids and rest; paracetamol can help with the fever.",
    "I can't help with investments, but for your cough please see your GP.",
]


def make_items(n: int, tag: str = "") -> list[JudgeItem]:
    return [
        JudgeItem(
            f"i{k}",
            f"Question {k}: my knee hurts, what should I do?",
            f"{RESPONSES[k % len(RESPONSES)]} (variant {k}{tag})",
            "B",
            "S0",
        )
        for k in range(n)
    ]


@contextmanager
def server_process(latency: float):
    """The fake OpenAI server in its own process; yields its base URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fake_openai", "--latency", str(latency)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        yield proc.stdout.readline().strip()
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)


def requests_served(url: str) -> int:
    with urllib.request.urlopen(url.removesuffix("/v1") + "/stats") as reply:
        return json.load(reply)["requests"]


def timed(coro) -> tuple[list[dict], float]:
    start = time.perf_counter()
    rows = asyncio.run(coro)
    return rows, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--items", type=int, default=500)
    parser.add_argument("--sequential-items", type=int, default=100)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    os.environ["ARGEN_BENCH_KEY"] = "bench"
    items = make_items(args.items)
    with server_process(args.latency) as url, tempfile.TemporaryDirectory() as tmp:

        def judge(concurrency: int) -> OpenAIJudge:
            return OpenAIJudge(
                JudgeConfig(
                    backend="openai",
                    model="bench",
                    base_url=url,
                    mode="combined",
                    api_key_env="ARGEN_BENCH_KEY",
                    concurrency=concurrency,
                )
            )

        cache = JudgementCache(Path(tmp) / "cache.sqlite")
        rows, seconds = timed(score_items(judge(args.concurrency), items, cache=cache))
        assert all(r["judge_ok"] for r in rows)
        rate, bound = args.items / seconds, args.concurrency / args.latency
        print(
            f"concurrent: {args.items} requests in {seconds:.2f} s = {rate:.1f} req/s, "
            f"bound {bound:.0f} req/s, {rate / bound:.1%} of the bound"
        )

        sequential = make_items(args.sequential_items, tag=" seq")
        _, seq_seconds = timed(score_items(judge(1), sequential))
        seq_rate = len(sequential) / seq_seconds
        print(
            f"sequential: {len(sequential)} requests in {seq_seconds:.2f} s = {seq_rate:.1f} "
            f"req/s; concurrent/sequential = {rate / seq_rate:.1f}x"
        )

        before = requests_served(url)
        _, cached_seconds = timed(score_items(judge(args.concurrency), items, cache=cache))
        print(f"cached re-run: {requests_served(url) - before} requests, {cached_seconds:.2f} s")

    local = LocalJudge()
    asyncio.run(score_items(local, make_items(8, tag=" warm")))  # load the encoder first
    rows, local_seconds = timed(score_items(local, items))
    print(
        f"local judge: {len(rows)} items in {local_seconds:.2f} s = "
        f"{len(rows) / local_seconds:.1f} items/s"
    )


if __name__ == "__main__":
    main()
