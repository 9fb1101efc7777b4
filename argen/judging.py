"""Build the configured judge and score items with it: the entry point stages use."""

import logging
from collections.abc import Sequence

from argen.config import Config, JudgeConfig
from argen.errors import ArgenError, JudgeOutage
from argen.judges.base import Backend, failure_rate
from argen.judges.cache import JudgementCache

log = logging.getLogger(__name__)


def make_backend(config: JudgeConfig) -> Backend:
    """The backend named by ``judge.backend``."""
    if config.backend == "local":
        from argen.judges.local import LocalJudge

        return LocalJudge()
    if config.backend == "openai":
        from argen.judges.openai import OpenAIJudge

        return OpenAIJudge(config)
    raise ArgenError(f"unknown judge backend {config.backend!r} (expected local or openai)")


def open_cache(config: Config) -> JudgementCache | None:
    """The persistent judgement cache under the artifacts root (None when turned off)."""
    if not config.judge.cache:
        return None
    return JudgementCache(config.storage.root / "judge_cache.sqlite")


def check_failure_rate(rows: Sequence[dict], limit: float, what: str) -> None:
    """Raise when more than `limit` of the judgements failed, quoting the first error."""
    rate = failure_rate(rows)
    if rate > limit:
        first = next(r["judge_error"] for r in rows if not r["judge_ok"])
        raise JudgeOutage(
            f"judging {what} failed for {rate:.1%} of {len(rows)} items, over the limit of "
            f"{limit:.1%} (judge.max_failure_rate); first error: {first}"
        )
    if rate:
        log.warning("judging %s: %.1f%% of judgements failed (excluded)", what, 100 * rate)
