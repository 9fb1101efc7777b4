"""Build the configured judge and score items with it: the entry point stages use."""

import logging
import math
from collections.abc import Sequence

from argen.config import Config, JudgeConfig
from argen.errors import ArgenError, JudgeOutage
from argen.hashing import dir_sha256
from argen.judging.base import Backend
from argen.judging.cache import JudgementCache

log = logging.getLogger(__name__)


def make_backend(config: JudgeConfig) -> Backend:
    """The backend named by ``judge.backend``."""
    if config.backend == "local":
        from argen.judging.local import LocalJudge

        return LocalJudge()
    if config.backend == "reader":
        from argen.judging.reader import PACKAGED, ReaderJudge

        return ReaderJudge(config.grader or PACKAGED)
    if config.backend == "openai":
        from argen.judging.openai import OpenAIJudge

        return OpenAIJudge(config)
    if config.backend == "reward_model":
        from argen.judging.reward_model import RewardModelJudge

        other = config.model_copy(update={"backend": config.reward_model.combine_with})
        return RewardModelJudge(config, make_backend(other))
    raise ArgenError(
        f"unknown judge backend {config.backend!r} (expected local, reader, openai or reward_model)"
    )


def judge_key(config: JudgeConfig) -> dict:
    """What of the judge keys a stage's output: its settings, the content of the reward model or
    grader directory it reads (one retrained in place is another judge), and the rubrics a
    grader with a criterion head reads."""
    key = config.model_dump(mode="json")
    path = config.reward_model.path
    if config.backend == "reward_model" and path is not None and path.is_dir():
        key["reward_model_sha256"] = dir_sha256(path)
    if config.grader is not None and config.grader.is_dir():
        key["grader_sha256"] = dir_sha256(config.grader)
    if config.backend == "reader":
        from argen.judging.reader import PACKAGED, rubric_identity

        folder = config.grader or PACKAGED
        key |= rubric_identity([p.name for p in folder.iterdir()] if folder.is_dir() else [])
    return key


def open_cache(config: Config) -> JudgementCache | None:
    """The persistent judgement cache under the artifacts root (None when turned off)."""
    if not config.judge.cache:
        return None
    return JudgementCache(config.storage.root / "judge_cache.sqlite")


def check_failures(failed: int, total: int, limit: float, what: str, first_error: str) -> None:
    """The one judge-failure policy: raise `JudgeOutage` when more than `limit` (the share
    ``judge.max_failure_rate``) of `total` judgements failed, naming the rate and first error.

    Every stage that judges applies it: evaluation over all its items, validation over each
    pass, GRPO rewards over the whole run so far (`reward_check_due` says when)."""
    rate = failed / total if total else 0.0
    if rate > limit:
        hint = "; the judge failed on all of them: check its configuration" if rate == 1 else ""
        raise JudgeOutage(
            f"judging {what} failed for {rate:.1%} of {total} items ({failed} failed{hint}), "
            f"over the limit of {limit:.1%} (judge.max_failure_rate); first error: {first_error}"
        )
    if failed:
        log.warning("judging %s: %.1f%% of judgements failed (excluded)", what, 100 * rate)


def check_so_far(rows: Sequence[dict], total: int, limit: float, what: str) -> None:
    """Stop a stage part-way (`JudgeOutage`) once its judgements so far make the verdict
    clear: more failures than the limit allows over all `total` items, or, after at least
    ``EARLY_MIN`` judgements, a failure rate whose lower confidence bound (Wilson, 3 sigma) is
    over the limit. A dead judge is noticed after one round of requests, not after every item
    was tried (hours with the default timeout and retries)."""
    failed = [r["judge_error"] for r in rows if not r["judge_ok"]]
    if not failed or len(rows) >= total:
        return
    certain = len(failed) > limit * total
    clear = len(rows) >= EARLY_MIN and wilson_lower(len(failed), len(rows)) > limit
    if certain or clear:
        raise JudgeOutage(
            f"judging {what} stopped early: {len(failed)} of the first {len(rows)} of {total} "
            f"judgements failed, clearly over the limit of {limit:.1%} "
            f"(judge.max_failure_rate); first error: {failed[0]}"
        )


EARLY_MIN = 8
"""Judgements needed before a failure rate alone (not a count) may stop a stage early."""


def wilson_lower(failed: int, n: int, z: float = 3.0) -> float:
    """The lower end of the Wilson score interval of a proportion `failed / n` at `z` sigma."""
    p = failed / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre - spread) / (1 + z * z / n)


def check_failure_rate(rows: Sequence[dict], limit: float, what: str) -> None:
    """`check_failures` over result rows (``judge_ok``, ``judge_error``)."""
    failed = [r["judge_error"] for r in rows if not r["judge_ok"]]
    check_failures(len(failed), len(rows), limit, what, failed[0] if failed else "")


def reward_check_due(failed: int, total: int, limit: float) -> bool:
    """Whether a training run's cumulative reward failures are judged yet: once there are
    enough judgements for one failure to be within the limit (``ceil(1 / limit)``, 20 at 5%),
    so a single early failure does not end a run, or at once when every judgement failed."""
    minimum = math.ceil(1 / limit - 1e-9) if limit > 0 else 1
    return total >= minimum or (total > 0 and failed == total)
