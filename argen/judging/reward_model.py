"""Any Hugging Face sequence-classification reward model as a judge (``judge.backend:
reward_model``), such as one trained with TRL's `RewardTrainer`.

A reward model reads (prompt, response) and gives one number: how much a rater would prefer
this answer. That is an overall quality signal, and it drives exactly one dimension here,
**Helpfulness**: its four fields (clarity, completeness, relevance, empathy) all take the
calibrated reward ``sigmoid((reward - center) / scale)`` (``judge.reward_model.center`` and
``scale``), so Helpfulness is that number. With TRL's Bradley-Terry loss the reward is a
log-odds, ``sigmoid(r - center)`` the chance the answer is preferred to one whose reward is
``center``; the reward's zero is arbitrary, so set ``center`` to the reward of a merely
acceptable answer (the log at debug level shows each batch's rewards).

**Ahimsa and Dharma come from another backend** (``judge.reward_model.combine_with``: local,
reader or openai), never from the scalar: the rubric needs a referral strength, a response
scope and the harm and domain fields, and no constant is neutral there (a fixed "no referral"
costs two thirds of Ahimsa on every tier A prompt; a fixed "emergency" costs on every tier C
one), so filling them from one number would make the tier and scope maths a systematic penalty.

The model is read with its chat template where its tokenizer has one (the user turn and the
assistant turn, as TRL builds a conversational example); otherwise a tokenizer with a separator
token (a cross-encoder such as DeBERTa) encodes the pair as two segments, and any other reads
``prompt + response + eos`` (TRL's non-conversational example). A pair longer than the model's
limit is a failed judgement (missing, never a score). The judge's identity, and so its cache
key, holds the SHA-256 of every file in the model's directory and the calibration.
"""

import asyncio
import functools
import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

from argen.config import JudgeConfig
from argen.errors import ArgenError
from argen.hashing import dir_sha256
from argen.judging import rubric
from argen.judging.base import Backend, JudgeFailure

log = logging.getLogger(__name__)

DRIVES = rubric.HELPFULNESS_FIELDS
"""The raw fields the calibrated reward fills; every other field is the other backend's."""
BATCH = 8
LONGEST = 8192
"""Tokens read at most, where neither tokenizer nor config states a smaller limit."""


def check_reward_model(path: Path | None) -> Path:
    """`path` if it is a sequence-classification model directory with one output; else an
    `ArgenError` saying what it is instead. A causal LM loaded as a classifier gets a random
    score head without an error from transformers, so its architecture is checked first."""
    if path is None:
        raise ArgenError("judge.backend reward_model needs judge.reward_model.path")
    path = Path(path)
    if not path.is_dir():
        raise ArgenError(f"judge.reward_model.path {path} is not a directory")
    if not (path / "config.json").is_file():
        raise ArgenError(f"{path} is not a Hugging Face model directory (no config.json)")
    try:
        config = AutoConfig.from_pretrained(path)
    except (OSError, ValueError, KeyError) as exc:
        raise ArgenError(f"{path}/config.json cannot be read as a model config: {exc}") from None
    architectures = list(getattr(config, "architectures", None) or [])
    if not any(a.endswith("ForSequenceClassification") for a in architectures):
        held = ", ".join(architectures) or "a model of no stated architecture"
        raise ArgenError(
            f"{path} holds {held}, not a sequence-classification reward model (an architecture "
            "ending in ForSequenceClassification, as TRL's RewardTrainer saves)"
        )
    if config.num_labels != 1:
        raise ArgenError(
            f"{path} has {config.num_labels} outputs; a reward model has one (a scalar reward)"
        )
    return path


@functools.cache
def load_reward_model(folder: Path, sha256: str) -> tuple[torch.nn.Module, object]:
    """The model (float32, eval mode, on the GPU where there is one) and its tokenizer, once
    per process for each content (`sha256`); a missing score head is an error, not random."""
    try:
        model, info = AutoModelForSequenceClassification.from_pretrained(
            folder, dtype=torch.float32, output_loading_info=True
        )
        tokenizer = AutoTokenizer.from_pretrained(folder)
    except (OSError, ValueError) as exc:
        raise ArgenError(f"cannot load the reward model {folder}: {exc}") from None
    if info["missing_keys"]:
        missing = ", ".join(sorted(info["missing_keys"])[:3])
        raise ArgenError(f"{folder}'s weights lack {missing}: its score head would be random")
    if tokenizer.pad_token is None:  # as TRL's RewardTrainer does
        tokenizer.pad_token = tokenizer.eos_token
    if model.config.pad_token_id is None:
        model.config.pad_token_id = tokenizer.pad_token_id
    tokenizer.padding_side = "right"
    device = "cuda" if torch.cuda.is_available() else "cpu"
    return model.to(device).eval(), tokenizer


def encode(tokenizer, prompt: str, response: str) -> dict:
    """One pair as the model reads it: its chat template, a two-segment pair, or TRL's text."""
    if tokenizer.chat_template:
        messages = [
            {"role": "user", "content": prompt},
            {"role": "assistant", "content": response},
        ]
        return dict(tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True))
    if tokenizer.sep_token is not None:
        return dict(tokenizer(prompt, response))
    return dict(tokenizer(prompt + response + (tokenizer.eos_token or "")))


def token_limit(model, tokenizer) -> int:
    """The longest input the model reads: the smaller stated limit, else `LONGEST`."""
    limits = [tokenizer.model_max_length, getattr(model.config, "max_position_embeddings", None)]
    return min([x for x in limits if isinstance(x, int) and 0 < x < 10**7] or [LONGEST])


@torch.inference_mode()
def rewards(model, tokenizer, pairs: Sequence[tuple[str, str]]) -> list[float | JudgeFailure]:
    """The raw reward of each pair (a failure for one longer than the model reads), in
    batches of similar length."""
    encoded = [encode(tokenizer, p, r) for p, r in pairs]
    limit = token_limit(model, tokenizer)
    found: list[float | JudgeFailure] = [
        JudgeFailure(f"{len(e['input_ids'])} tokens, over the reward model's limit of {limit}")
        for e in encoded
    ]
    order = sorted(
        (i for i, e in enumerate(encoded) if len(e["input_ids"]) <= limit),
        key=lambda i: len(encoded[i]["input_ids"]),
    )
    device = next(model.parameters()).device
    for start in range(0, len(order), BATCH):
        chunk = order[start : start + BATCH]
        batch = tokenizer.pad([encoded[i] for i in chunk], return_tensors="pt")
        logits = model(**{k: v.to(device) for k, v in batch.items()}).logits
        for i, value in zip(chunk, logits[:, 0].float().cpu().tolist(), strict=True):
            found[i] = value
    return found


def calibrated(reward: float, center: float, scale: float) -> float:
    """``sigmoid((reward - center) / scale)``, in [0, 1] (no overflow at any reward)."""
    z = (reward - center) / scale
    return 1 / (1 + math.exp(-z)) if z >= 0 else math.exp(z) / (1 + math.exp(z))


def combine(
    other: Mapping | JudgeFailure, reward: float | JudgeFailure, center: float, scale: float
) -> Mapping | JudgeFailure:
    """The other backend's fields with Helpfulness's four set to the calibrated reward; a
    failure of either is the judgement's failure."""
    if isinstance(other, JudgeFailure):
        return other
    if isinstance(reward, JudgeFailure):
        return reward
    value = calibrated(reward, center, scale)
    return {**other, **{name: value for name in DRIVES}}


class RewardModelJudge:
    """The judge backend of a sequence-classification reward model, combined with `other`."""

    def __init__(self, config: JudgeConfig, other: Backend):
        settings = config.reward_model
        self.folder = check_reward_model(settings.path)
        self.sha256 = dir_sha256(self.folder)
        self.center, self.scale = settings.center, settings.scale
        self.other = other
        self.name = f"reward_model/{self.folder.name}-{self.sha256[:8]}+{other.name}"
        self.identity = {
            "backend": "reward_model",
            "sha256": self.sha256,
            "center": self.center,
            "scale": self.scale,
            "with": dict(other.identity),
        }

    async def judge_many(self, pairs: Sequence[tuple[str, str]]) -> list[Mapping | JudgeFailure]:
        model, tokenizer = load_reward_model(self.folder, self.sha256)
        others, raw = await asyncio.gather(
            self.other.judge_many(pairs), asyncio.to_thread(rewards, model, tokenizer, pairs)
        )
        values = sorted(r for r in raw if not isinstance(r, JudgeFailure))
        if values:
            log.debug(
                "reward model: %d rewards, median %.3f, range [%.3f, %.3f]",
                len(values),
                values[len(values) // 2],
                values[0],
                values[-1],
            )
        return [combine(o, r, self.center, self.scale) for o, r in zip(others, raw, strict=True)]
