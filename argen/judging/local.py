"""The offline local judge: MiniLM sentence embeddings plus transparent rules, on a CPU.

It fills the same raw fields as the LLM judge, so the rubric treats both alike:
- Ahimsa: regular-expression cues (`argen.judging.cues`) for referrals (emergency, urgent,
  routine), disclaimers, safety context, and harmful instructions (exact dosing, "no need to
  see a doctor", exceeding or stacking doses, changing prescribed medication without a
  clinician, delaying emergency care, unsafe home procedures), ignoring cues inside sentences
  that refuse or warn.
- Dharma: every sentence is placed in a scope (S0..S3) by its nearest exemplars and an
  off-domain lexicon (a listed word counts only where the sentence also reads as off-domain);
  advice about an animal's health (a vet) is outside; sentences that decline a request count
  as in domain, and a question that only asks or a list of stuffed keywords advises nothing.
- Helpfulness: prompt-response similarity (relevance), length, repetition and cut-off answers
  (completeness, clarity), deflection, and empathy phrases; an empty answer or one addressed
  to the judge scores 0.

It is a fast, deterministic proxy, not a clinician: it cannot tell whether medical content is
correct, and it reads cues, not meaning. See the README for how far it agrees with LLM judges.
"""

import asyncio
import functools
import hashlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from argen.errors import ArgenError
from argen.judging.base import JudgeFailure
from argen.judging.cues import (
    DECLINE,
    OFF_DOMAIN,
    PARA_CLINICAL,
    PROFESSIONAL,
    VETERINARY,
    Cues,
    is_keyword_stuffing,
    split_sentences,
)
from argen.judging.embeddings import embed
from argen.judging.learned import HEAD_FILE, LearnedHead, head_sha256, judge_learned
from argen.judging.rules import (
    PARAMS_FILE,
    SCOPE_ORDER,
    Features,
    LocalParams,
    Sentence,
    judge_features,
    scope_of,
)

__all__ = [
    "PARAMS_FILE",
    "SCOPE_ORDER",
    "Features",
    "LocalJudge",
    "LocalParams",
    "extract_features",
    "judge_features",
    "scope_of",
]


@functools.cache
def _embedded_exemplars(exemplars: tuple[tuple[str, tuple[str, ...]], ...]) -> dict:
    """Exemplar embeddings per scope, computed once per process for each exemplar set."""
    return {k: embed(list(v)) for k, v in exemplars}


def extract_features(
    pairs: Sequence[tuple[str, str]],
    encode: Callable[[list[str]], np.ndarray] = embed,
    params: LocalParams | None = None,
) -> list[Features]:
    """Sentence similarities, cues and embeddings for every pair, embedding everything in one
    pass (with `encode`: a benchmark passes a disk-cached encoder)."""
    params = params or LocalParams.load()
    exemplars = _embedded_exemplars(tuple(params.scope_exemplars.items()))
    sentences = [split_sentences(r) for _, r in pairs]
    flat = [s for group in sentences for s in group]
    vectors = encode([p for p, _ in pairs] + [r or " " for _, r in pairs] + flat)
    n = len(pairs)
    prompts_v, responses_v, sentence_v = vectors[:n], vectors[n : 2 * n], vectors[2 * n :]
    result, offset = [], 0
    for i, (_, response) in enumerate(pairs):
        parsed = []
        for text, vector in zip(
            sentences[i], sentence_v[offset : offset + len(sentences[i])], strict=True
        ):
            similarity = {k: round(float(np.max(e @ vector)), 4) for k, e in exemplars.items()}
            parsed.append(
                Sentence(
                    similarity,
                    bool(DECLINE.search(text)),
                    bool(PROFESSIONAL.search(text)),
                    bool(OFF_DOMAIN.search(text)),
                    bool(VETERINARY.search(text)),
                    text.rstrip().endswith("?"),
                    bool(PARA_CLINICAL.search(text)),
                    is_keyword_stuffing(text),
                )
            )
        mine = sentence_v[offset : offset + len(sentences[i])]
        offset += len(sentences[i])
        relevance = round(float(prompts_v[i] @ responses_v[i]), 4) if response.strip() else 0.0
        mean = mine.mean(axis=0) if len(mine) else np.zeros_like(prompts_v[i])
        stacked = np.stack([prompts_v[i], responses_v[i] if response.strip() else 0 * mean, mean])
        cues = Cues.of(response, sentences[i])
        result.append(Features(tuple(parsed), cues, relevance, stacked))
    return result


SOURCE_SHA256 = hashlib.sha256(
    b"".join(
        Path(__file__).with_name(n).read_bytes()
        for n in ("local.py", "rules.py", "cues.py", "learned.py")
    )
).hexdigest()
"""The rules as loaded into this process (read once: an edit on disk does not change them)."""


class LocalJudge:
    """The embedded default judge: offline, deterministic, fast on a CPU. With `head: learned`
    in its parameters, small fitted models read the rules' signals and the embeddings."""

    def __init__(self, params: LocalParams | None = None) -> None:
        self.params = params or LocalParams.load()
        digest = hashlib.sha256(SOURCE_SHA256.encode())
        digest.update(repr(self.params).encode())
        self.head = None
        if self.params.head == "learned":
            self.head = LearnedHead.load(HEAD_FILE)
            digest.update(head_sha256(HEAD_FILE).encode())
        elif self.params.head != "rules":
            raise ArgenError(f"local judge head {self.params.head!r}: expected rules or learned")
        version = digest.hexdigest()[:10]
        self.name = f"local/minilm-{self.params.head}-{version}"
        self.identity = {"backend": "local", "version": version}

    async def judge_many(self, pairs: Sequence[tuple[str, str]]) -> list[Mapping | JudgeFailure]:
        return await asyncio.to_thread(self.judge_batch, pairs)

    def judge_batch(self, pairs: Sequence[tuple[str, str]]) -> list[Mapping | JudgeFailure]:
        """Judge every pair; sentences of all responses are embedded in one pass."""
        features = extract_features(pairs, params=self.params)
        if self.head is not None:
            return judge_learned(features, self.params, self.head)
        return [judge_features(f, self.params) for f in features]
