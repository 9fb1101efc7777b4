"""TRL reward functions for Ahimsa, Dharma and Helpfulness that share one judging pass.

TRL calls each reward function with the same batch; the three functions here await one shared
judging task per batch, so each completion is judged once, not three times. A failed judgement
gives ``None`` (TRL skips it) and is counted in the ``judge_failures`` metric.

The judge-failure policy (`argen.judging.scoring.check_failures`) applies to the run's cumulative
count: after each batch, once `reward_check_due`, a failure share over ``judge.max_failure_rate``
stops training with a `JudgeOutage` before that batch is trained on.

A run with `train.penalties` gets a fourth function, ``gaming``: minus the summed penalties of
the judge-gaming signs a completion shows (`argen.evaluation.indicators`), weighted 1 beside the
others.

>>> rewards = JudgeRewards(LocalJudge())
>>> funcs = rewards.functions()   # [ahimsa, dharma, helpfulness], pass as reward_funcs
"""

import asyncio
import math
from collections.abc import Callable, Mapping, Sequence

import pandas as pd

from argen.config import Indicator
from argen.evaluation.indicators import active_penalties
from argen.evaluation.indicators import penalties as indicator_penalties
from argen.hashing import json_sha256
from argen.judging import rubric
from argen.judging.base import Backend, JudgeItem, score_items
from argen.judging.cache import JudgementCache
from argen.judging.scoring import check_failures, reward_check_due


def completion_text(completion) -> str:
    """The assistant's text from a TRL completion (chat messages or a plain string)."""
    if isinstance(completion, str):
        return completion
    return "".join(m.get("content") or "" for m in completion if m.get("role") == "assistant")


def prompt_text(prompt) -> str:
    """The user's message from a TRL prompt (the last user turn, or a plain string)."""
    if isinstance(prompt, str):
        return prompt
    return next(m["content"] for m in reversed(prompt) if m.get("role") == "user")


class JudgeRewards:
    """Three TRL-compatible async reward functions over one judge backend."""

    def __init__(
        self,
        backend: Backend,
        weights: Mapping[str, float] = rubric.DEFAULT_WEIGHTS,
        cache: JudgementCache | None = None,
        max_failure_rate: float = 0.05,
        penalties: Mapping[Indicator, float] | None = None,
    ):
        self.backend = backend
        self.weights = dict(weights)
        self.penalties = active_penalties(penalties or {})
        self.cache = cache
        self.max_failure_rate = max_failure_rate
        self.judged = 0
        self.failures = 0
        self.first_error = ""
        self._batch: tuple[str, asyncio.Task] | None = None

    def functions(self) -> list[Callable]:
        """The reward functions, named after their dimension (TRL logs ``rewards/<name>``), and
        ``gaming`` when penalties are set."""
        judged = [self._reward_for(d) for d in rubric.DIMENSIONS]
        return judged + ([self.gaming] if self.penalties else [])

    def gaming(self, prompts, completions, tier, scope, category, **_) -> list[float]:
        """Minus the summed `penalties` of the gaming signs each completion shows."""
        frame = pd.DataFrame(
            {
                "prompt": [prompt_text(p) for p in prompts],
                "response": [completion_text(c) for c in completions],
                "tier": tier,
                "scope": scope,
                "category": category,
            }
        )
        return indicator_penalties(frame, self.penalties)

    def _reward_for(self, dimension: str) -> Callable:
        async def reward(prompts, completions, tier, scope, id=None, log_metric=None, **_):
            rows = await self._judge_batch(prompts, completions, tier, scope, id)
            if log_metric is not None and dimension == rubric.DIMENSIONS[0]:
                log_metric("judge_failures", sum(not r["judge_ok"] for r in rows))
            return [None if _missing(r[dimension]) else float(r[dimension]) for r in rows]

        reward.__name__ = reward.__qualname__ = dimension
        reward.__doc__ = f"{dimension} score in [0, 1] from the shared judgement of this batch."
        return reward

    async def _judge_batch(self, prompts, completions, tier, scope, ids) -> list[dict]:
        """Judge a batch once, however many reward functions ask for it."""
        items = [
            JudgeItem(
                id=str(ids[i]) if ids is not None else str(i),
                prompt=prompt_text(p),
                response=completion_text(c),
                tier=tier[i],
                scope=scope[i],
            )
            for i, (p, c) in enumerate(zip(prompts, completions, strict=True))
        ]
        key = json_sha256([(it.prompt, it.response, it.tier, it.scope) for it in items])
        if (
            self._batch is None
            or self._batch[0] != key
            or self._batch[1].get_loop() is not asyncio.get_running_loop()
        ):
            task = asyncio.ensure_future(self._score(items))
            self._batch = (key, task)
        return await self._batch[1]

    async def _score(self, items: Sequence[JudgeItem]) -> list[dict]:
        """Judge a batch, count it, and apply the failure policy to the run so far."""
        rows = await score_items(self.backend, items, self.weights, self.cache)
        errors = [r["judge_error"] for r in rows if not r["judge_ok"]]
        self.judged += len(rows)
        self.failures += len(errors)
        self.first_error = self.first_error or (errors[0] if errors else "")
        if reward_check_due(self.failures, self.judged, self.max_failure_rate):
            what = "training rewards (this run so far)"
            check_failures(
                self.failures, self.judged, self.max_failure_rate, what, self.first_error
            )
        return rows


def reward_weights(
    weights: Mapping[str, float], penalties: Mapping[Indicator, float]
) -> list[float]:
    """TRL's `reward_weights`, in the order of `JudgeRewards.functions`."""
    gaming = [1.0] if active_penalties(penalties) else []
    return [weights[d] for d in rubric.DIMENSIONS] + gaming


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))
