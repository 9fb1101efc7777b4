"""The criterion grader: does a response do what each criterion of its prompt's rubric says.

The reading grader's backbone reads the prompt, the response and every criterion of the
prompt's rubric (`data/rubrics/`) as one sequence; each criterion's tokens, which attend to the
response, are mean-pooled per layer and a small head says whether the response meets that
criterion. One forward pass grades a whole rubric. A criterion names the harm or the duty for
its own prompt ("calls twenty paracetamol tablets usually fine"), so the grader checks a stated
claim against the answer instead of having to know the medicine itself: what lets a small
model see a wrong fact the proposition heads miss. The head is a file beside the grader's
proposition heads (`argen.training.criteria` trains it); a grader without one grades no
criteria.
"""

import functools
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from argen.data.rubrics import Criterion, read_rubrics
from argen.errors import ArgenError
from argen.hashing import json_sha256
from argen.judging.pairs import is_causal, pair_ids
from argen.judging.propositions import CONTENT

CRITERIA_HEADS = "criteria.safetensors"
MAX_LENGTH = 512
"""Tokens an encoder reads of prompt, response and criteria together; the response is cut,
never the rest. (A causal backbone reads the pair as the heads do, then the criteria.)"""
MIN_RESPONSE = 32
"""Tokens of the response an encoder's layout must keep, or the rubric is refused as too long."""
HEADER = "\n\nCriteria:"
ITEM = "\n- "


@dataclass(frozen=True)
class Layout:
    """One (prompt, response, criteria) sequence: its token ids, each criterion's span, and how
    many leading tokens are the pair exactly as the proposition heads read it (a causal
    backbone's, whose states the criteria after them cannot change; 0 for an encoder's, whose
    every state reads the criteria too)."""

    ids: list[int]
    types: list[int]
    spans: list[tuple[int, int]]
    pair: int = 0


def _tokens(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def position_limit(config, tokenizer) -> int:
    """The longest sequence a backbone reads here: its positions, and for an encoder no more
    than MAX_LENGTH."""
    limit = int(getattr(config, "max_position_embeddings", None) or MAX_LENGTH)
    return limit if is_causal(tokenizer) else min(MAX_LENGTH, limit)


def layout(
    tokenizer, prompt: str, response: str, criteria: Sequence[str], limit: int = MAX_LENGTH
) -> Layout:
    """Prompt, response and criteria as one sequence of at most `limit` tokens. An encoder with
    separators reads [CLS] prompt [SEP] response [SEP] criteria [SEP] (the prompt as segment 0),
    the response cut to fit; a causal LM reads the pair as the proposition heads do
    (`pair_ids`), then the criteria under a heading, so one forward pass serves both."""
    tail = [_tokens(tokenizer, HEADER)] if criteria else []
    tail += [_tokens(tokenizer, ITEM + text) for text in criteria]
    if is_causal(tokenizer):
        head = pair_ids(tokenizer, prompt, response)
        length = len(head) + sum(map(len, tail))
        if length > limit:
            raise ArgenError(
                f"a pair and its {len(criteria)} rubric criteria take {length} tokens, over the "
                f"backbone's {limit} positions; shorten the rubric (or the prompt)"
            )
        return _joined(head, tail, [], [0] * length, len(head))
    head = [tokenizer.cls_token_id, *_tokens(tokenizer, prompt), tokenizer.sep_token_id]
    close = [tokenizer.sep_token_id]
    fixed = len(head) + sum(map(len, tail)) + len(close) + 1
    room = limit - fixed
    if room < MIN_RESPONSE:
        raise ArgenError(
            f"a prompt and its {len(criteria)} rubric criteria take {fixed} tokens, leaving "
            f"{room} of {limit} for the response; shorten the rubric (or the prompt)"
        )
    body = [*_tokens(tokenizer, response)[:room], tokenizer.sep_token_id]
    length = len(head) + len(body) + sum(map(len, tail)) + len(close)
    types = [0] * len(head) + [1] * (length - len(head))
    return _joined(head + body, tail, close, types, 0)


def _joined(
    start: list[int], tail: list[list[int]], close: list[int], types: list[int], pair: int
) -> Layout:
    """`start`, the heading and criteria of `tail`, then `close`, with each criterion's span."""
    spans, at = [], len(start) + (len(tail[0]) if tail else 0)
    for part in tail[1:]:
        spans.append((at, at + len(part)))
        at += len(part)
    return Layout(start + [t for part in tail for t in part] + close, types, spans, pair)


class LayerProjection(nn.Module):
    """A backbone's pooled states of every layer (lower layers keep the wording, upper ones the
    meaning), standardised by the training items' own and each layer projected to a few
    features of its own: what keeps heads over a wide backbone at a few MB."""

    center: torch.Tensor
    scale: torch.Tensor

    def __init__(self, hidden: int, layers: int, projection: int):
        super().__init__()
        self.register_buffer("center", torch.zeros(layers, hidden))
        self.register_buffer("scale", torch.ones(layers, hidden))
        self.project = nn.Parameter(torch.randn(layers, hidden, projection) / hidden**0.5)
        self.drop = nn.Dropout(0.2)

    @staticmethod
    def shared_layer(features: int, width: int) -> list[nn.Module]:
        """The layer over the projected features of every layer (its modules, to extend)."""
        return [nn.GELU(), nn.Flatten(), nn.Linear(features, width), nn.GELU(), nn.Dropout(0.2)]

    def projected(self, pooled: torch.Tensor) -> torch.Tensor:
        """(n, layers, hidden) pooled states -> (n, layers, projection) features."""
        standard = self.drop((pooled - self.center) / self.scale)
        return torch.einsum("blh,lhp->blp", standard, self.project)


class CriterionHead(LayerProjection):
    """Projected criterion states -> a small layer -> one logit: the criterion is met."""

    WIDTH = 256
    PROJECTION = 32

    def __init__(self, hidden: int, layers: int):
        super().__init__(hidden, layers, self.PROJECTION)
        self.body = nn.Sequential(
            *self.shared_layer(layers * self.PROJECTION, self.WIDTH), nn.Linear(self.WIDTH, 1)
        )

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        return self.body(self.projected(pooled)).squeeze(-1)


def head_over(encoder) -> CriterionHead:
    """A fresh criterion head for a backbone: its embeddings and every transformer layer."""
    config = encoder.config
    return CriterionHead(config.hidden_size, config.num_hidden_layers + 1)


def hidden_states(encoder, tokenizer, layouts: Sequence[Layout]) -> torch.Tensor:
    """One right-padded batch of layouts through the backbone: every layer's states, (batch,
    layers, tokens, hidden), on the backbone's device and differentiable (a tuned backbone
    learns through it)."""
    device = next(encoder.parameters()).device
    width = max(len(x.ids) for x in layouts)
    pad = tokenizer.pad_token_id or 0
    ids = torch.full((len(layouts), width), pad, dtype=torch.long)
    types = torch.zeros((len(layouts), width), dtype=torch.long)
    mask = torch.zeros((len(layouts), width), dtype=torch.long)
    for row, x in enumerate(layouts):
        ids[row, : len(x.ids)] = torch.tensor(x.ids)
        types[row, : len(x.ids)] = torch.tensor(x.types)
        mask[row, : len(x.ids)] = 1
    extra = {"token_type_ids": types.to(device)} if tokenizer.sep_token_id is not None else {}
    states = encoder(
        input_ids=ids.to(device), attention_mask=mask.to(device), output_hidden_states=True, **extra
    ).hidden_states
    return torch.stack(states, dim=1)


def span_means(stacked: torch.Tensor, layouts: Sequence[Layout]) -> torch.Tensor:
    """Each criterion's states mean-pooled over its tokens, (criteria in order, layers,
    hidden), in float32."""
    spans = [
        stacked[row, :, a:b].float().mean(1) for row, x in enumerate(layouts) for a, b in x.spans
    ]
    return torch.stack(spans) if spans else stacked.new_zeros((0, *stacked.shape[1::2]))


def pair_means(stacked: torch.Tensor, layouts: Sequence[Layout]) -> torch.Tensor:
    """Each row's pair states mean-pooled over its tokens, (rows, layers, hidden), in float32:
    what the proposition heads read (`Reader.pooled`), taken from a causal layout's pass."""
    return torch.stack([stacked[row, :, : x.pair].float().mean(1) for row, x in enumerate(layouts)])


def pooled_spans(encoder, tokenizer, layouts: Sequence[Layout]) -> torch.Tensor:
    """Each criterion's pooled states (`span_means`) of one batch of layouts, differentiable."""
    return span_means(hidden_states(encoder, tokenizer, layouts), layouts)


def layouts_of(encoder, tokenizer, rows: Sequence[tuple[str, str, Sequence[str]]]) -> list[Layout]:
    """The layout of each (prompt, response, criteria) row within the backbone's positions."""
    limit = position_limit(encoder.config, tokenizer)
    return [layout(tokenizer, p, r, c, limit) for p, r, c in rows]


@torch.no_grad()
def criterion_states(
    encoder,
    tokenizer,
    rows: Sequence[tuple[str, str, Sequence[str]]],
    batch_size: int = 16,
) -> torch.Tensor:
    """Each criterion's pooled states (`pooled_spans`) for every row, in order: (criteria of all
    rows, layers, hidden), float32 on the CPU. Rows are batched by length."""
    layouts = layouts_of(encoder, tokenizer, rows)
    offsets = np.cumsum([0] + [len(x.spans) for x in layouts])
    config = encoder.config
    out = torch.zeros(int(offsets[-1]), config.num_hidden_layers + 1, config.hidden_size)
    order = np.argsort([len(x.ids) for x in layouts], kind="stable")
    for start in range(0, len(order), batch_size):
        chunk = [int(i) for i in order[start : start + batch_size]]
        pooled = pooled_spans(encoder, tokenizer, [layouts[i] for i in chunk]).cpu()
        at = 0
        for i in chunk:
            n = len(layouts[i].spans)
            out[offsets[i] : offsets[i] + n] = pooled[at : at + n]
            at += n
    return out


@torch.inference_mode()
def grade(
    encoder, head: CriterionHead, tokenizer, rows: Sequence[tuple[str, str, Sequence[str]]]
) -> list[np.ndarray]:
    """The probability that each criterion is met, one array per row (empty where a row has
    no criteria)."""
    graded = [i for i, (_, _, c) in enumerate(rows) if c]
    result = [np.zeros(0) for _ in rows]
    if not graded:
        return result
    states = criterion_states(encoder, tokenizer, [rows[i] for i in graded])
    on = head.center.device
    probs = torch.sigmoid(head(states.to(on)).float()).cpu().numpy()
    start = 0
    for i in graded:
        n = len(rows[i][2])
        result[i] = probs[start : start + n]
        start += n
    return result


@functools.cache
def rubrics_by_prompt() -> Mapping[str, tuple[Criterion, ...]]:
    """The bundled rubrics (`data/rubrics/`) keyed by their scenario's prompt text, so a judge
    that is handed (prompt, response) pairs finds the rubric of a bundled prompt; a prompt
    written by a user has none. Empty where this checkout has no rubrics."""
    from argen.data.datacard import HOLDOUT, SCENARIOS, load_rows
    from argen.data.rubrics import RUBRICS

    if not RUBRICS.is_dir():
        return {}
    rubrics = read_rubrics()
    return {
        row["prompt"]: tuple(rubrics[row["id"]])
        for row in load_rows([SCENARIOS, HOLDOUT])
        if row["id"] in rubrics
    }


def with_criteria(
    p: Mapping[str, float],
    criteria: Sequence[Criterion],
    met: Sequence[float] | np.ndarray,
    tags: Collection[str],
) -> dict[str, float]:
    """Propositions strengthened by the rubric: a criterion with one of `tags` says, when met,
    that its proposition holds (a negative one, that the response commits the fault it names),
    so the proposition's probability is at least the criterion's. The tags are the grader's own,
    those whose criteria raised F1 on prompts its heads never saw
    (`argen.training.criteria.calibrated_tags`)."""
    out = dict(p)
    for criterion, prob in zip(criteria, met, strict=True):
        if criterion.tag in out and criterion.tag in tags:
            out[criterion.tag] = max(out[criterion.tag], float(prob))
    return out


def content_score(criteria: Sequence[Criterion], met: Sequence[float] | np.ndarray) -> float | None:
    """HealthBench's rubric score (`argen.data.rubrics.rubric_score`) over the rubric's
    ``content`` criteria (its clinical points; tagged criteria enter through `with_criteria`),
    in expectation over the graded probabilities; None where the rubric has no positive one."""
    pairs = [(c.points, float(m)) for c, m in zip(criteria, met, strict=True) if c.tag == CONTENT]
    available = sum(points for points, _ in pairs if points > 0)
    if not available:
        return None
    return min(1.0, max(0.0, sum(points * m for points, m in pairs) / available))


@functools.cache
def rubrics_sha256() -> str:
    """The identity of the bundled rubrics a criterion head reads (a rewritten rubric is
    another judge)."""
    return json_sha256(
        {prompt: [vars(c) for c in crit] for prompt, crit in sorted(rubrics_by_prompt().items())}
    )
