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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from argen.data.rubrics import Criterion, read_rubrics
from argen.errors import ArgenError
from argen.hashing import json_sha256
from argen.judging.propositions import CONTENT

CRITERIA_HEADS = "criteria.safetensors"
MAX_LENGTH = 512
"""Tokens of prompt, response and criteria together; the response is cut, never the rest."""
MIN_RESPONSE = 32
"""Tokens of the response a layout must keep, or the rubric is refused as too long."""
RESPONSE_MARK = "\n\nResponse:\n"
"""Ends the prompt where a backbone's tokenizer has no separator of its own (causal LMs)."""
HEADER = "\n\nCriteria:"
ITEM = "\n- "


@dataclass(frozen=True)
class Layout:
    """One (prompt, response, criteria) sequence: its token ids and each criterion's span."""

    ids: list[int]
    types: list[int]
    spans: list[tuple[int, int]]


def _tokens(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def position_limit(config) -> int:
    """The longest sequence a backbone reads: MAX_LENGTH, or less where its positions end."""
    limit = getattr(config, "max_position_embeddings", None) or MAX_LENGTH
    return min(MAX_LENGTH, int(limit))


def layout(
    tokenizer, prompt: str, response: str, criteria: Sequence[str], limit: int = MAX_LENGTH
) -> Layout:
    """Prompt, response and criteria as one sequence. An encoder with separators reads
    [CLS] prompt [SEP] response [SEP] criteria [SEP] (the prompt as segment 0); a causal LM reads
    them joined by headings. The response is cut to fit `limit`."""
    encoder = tokenizer.sep_token_id is not None and tokenizer.cls_token_id is not None
    head = _tokens(tokenizer, prompt)
    if encoder:
        head = [tokenizer.cls_token_id, *head, tokenizer.sep_token_id]
    else:
        head = head + _tokens(tokenizer, RESPONSE_MARK)
    tail_parts = [_tokens(tokenizer, HEADER)]
    tail_parts += [_tokens(tokenizer, ITEM + text) for text in criteria]
    close = [tokenizer.sep_token_id] if encoder else []
    fixed = len(head) + sum(map(len, tail_parts)) + len(close) + (1 if encoder else 0)
    room = limit - fixed
    if room < MIN_RESPONSE:
        raise ArgenError(
            f"a prompt and its {len(criteria)} rubric criteria take {fixed} tokens, leaving "
            f"{room} of {limit} for the response; shorten the rubric (or the prompt)"
        )
    body = _tokens(tokenizer, response)[:room]
    if encoder:
        body = [*body, tokenizer.sep_token_id]
    ids = head + body
    spans = []
    start = len(ids) + len(tail_parts[0])
    for part in tail_parts[1:]:
        spans.append((start, start + len(part)))
        start += len(part)
    ids = ids + [t for part in tail_parts for t in part] + close
    types = [0] * len(head) + [1] * (len(ids) - len(head)) if encoder else [0] * len(ids)
    return Layout(ids, types, spans)


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


def pooled_spans(encoder, tokenizer, layouts: Sequence[Layout]) -> torch.Tensor:
    """One padded batch of layouts through the backbone: each criterion's states of every layer,
    mean-pooled over its tokens, (criteria in order, layers, hidden), on the backbone's device
    and differentiable (a tuned backbone learns through it)."""
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
    stacked = torch.stack(states, dim=1)  # (batch, layers, tokens, hidden)
    return torch.stack(
        [stacked[row, :, a:b].float().mean(1) for row, x in enumerate(layouts) for a, b in x.spans]
    )


def layouts_of(encoder, tokenizer, rows: Sequence[tuple[str, str, Sequence[str]]]) -> list[Layout]:
    """The layout of each (prompt, response, criteria) row within the backbone's positions."""
    limit = position_limit(encoder.config)
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
    p: Mapping[str, float], criteria: Sequence[Criterion], met: Sequence[float] | np.ndarray
) -> dict[str, float]:
    """Propositions strengthened by the rubric: a criterion tagged with a proposition says, when
    met, that the proposition holds (a negative one, that the response commits the fault it
    names), so the proposition's probability is at least the criterion's."""
    out = dict(p)
    for criterion, prob in zip(criteria, met, strict=True):
        if criterion.tag in out:
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
