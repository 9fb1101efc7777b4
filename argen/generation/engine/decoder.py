"""A fast decoder for Llama and Qwen2 family models, for GRPO rollouts and evaluation on a GPU.

It keeps its own inference copy of the policy with any LoRA weights merged in (refreshed with
`load`), a static KV cache, and, on a GPU, a compiled decode step captured once as a CUDA graph
and replayed for every token, with early exit when every sequence has ended. Plain
`generate` through an unmerged LoRA model is launch-bound on a GPU; this is not. On a CPU the
same code runs eagerly (no compilation, no graphs), which is how the tests check it.
"""

import logging
import math
from dataclasses import dataclass
from typing import overload

import torch
import torch.nn.functional as F

from argen.errors import ArgenError
from argen.generation.engine.kernels import head, layer
from argen.generation.engine.weights import (
    Layer,
    layer_weights,
    merged_weights,
    rotary_tables,
    unsupported_reason,
)

log = logging.getLogger(__name__)

EXIT_CHECK_EVERY = 16
"""Decode steps between checks that every sequence has ended (each check is a host sync)."""
CACHE_LENGTH_MULTIPLE = 128
"""KV cache lengths are rounded up to this, so a few captured graphs serve all prompt lengths."""
KEPT_GRAPHS = 2


@dataclass(frozen=True)
class Sampling:
    """How the next token is picked; temperature 0 is greedy decoding."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0


@dataclass(frozen=True)
class Decoded:
    """Completion tokens (with the end-of-sequence token that ended each, if any) and the
    log-probability of each token under the temperature-scaled policy."""

    tokens: list[list[int]]
    logprobs: list[list[float]]


@dataclass
class _Batch:
    """The static buffers one captured decode graph reads and writes."""

    token: torch.Tensor  # (B,) the token fed to the next step
    position: torch.Tensor  # (B,) its rotary position
    slot: torch.Tensor  # (1,) its index in the KV cache
    step: torch.Tensor  # (1,) its index in the output
    finished: torch.Tensor  # (B,) bool
    key_valid: torch.Tensor  # (B, L) bool: cache slots a query may attend to
    out_tokens: torch.Tensor  # (B, N)
    out_logprobs: torch.Tensor  # (B, N) float32
    keys: list[torch.Tensor]  # per layer (B, kv_heads, L, head_dim)
    values: list[torch.Tensor]
    eos: torch.Tensor  # (E,) ids that end a sequence
    pad: int
    sampling: Sampling
    graph: torch.cuda.CUDAGraph | None = None


class Engine:
    """Inference copy of a Llama or Qwen2 family policy with a static-cache, graph-captured
    decoder."""

    def __init__(self, config, device: torch.device, dtype: torch.dtype):
        """An empty engine for models of `config` (weights come with `load`); refuses a config
        it cannot run, naming the reason."""
        reason = unsupported_reason(config)
        if reason:
            raise ArgenError(f"the fast generation engine cannot run this model: {reason}")
        self.config = config
        self.device = device
        self.dtype = dtype
        self.heads = config.num_attention_heads
        self.kv_heads = config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.heads
        self.eps = config.rms_norm_eps
        self.use_graphs = device.type == "cuda"
        self.layer_step = torch.compile(layer, dynamic=False) if self.use_graphs else layer
        self.head_step = torch.compile(head, dynamic=False) if self.use_graphs else head
        self.layers: list[Layer] = []
        self.batches: dict[tuple, _Batch] = {}
        self.cos, self.sin = rotary_tables(config, config.max_position_embeddings, device, dtype)

    @classmethod
    def for_model(cls, model, dtype: torch.dtype | None = None) -> "Engine":
        """An engine shaped like `model` on its device, in `dtype` (default: the model's),
        holding its merged weights."""
        embeddings = model.get_input_embeddings().weight
        engine = cls(model.config, embeddings.device, dtype or embeddings.dtype)
        engine.load(model)
        return engine

    @torch.no_grad()
    def load(self, model) -> None:
        """Copy `model`'s weights (LoRA merged) in place, so captured graphs see the new ones.
        A tied output head is the embedding itself; an untied one has its own copy."""
        weights = merged_weights(model)
        embed = weights["model.embed_tokens.weight"]
        fresh = [embed, weights["model.norm.weight"], weights.get("lm_head.weight", embed)]
        layers = [layer_weights(weights, i) for i in range(self.config.num_hidden_layers)]
        if not self.layers:
            self.embed, self.norm = self._cast(fresh[0]), self._cast(fresh[1])
            tied = "lm_head.weight" not in weights
            self.lm_head = self.embed if tied else self._cast(fresh[2])
            self.layers = [Layer(*map(self._cast, x.tensors())) for x in layers]
            return
        for mine, new in zip((self.embed, self.norm, self.lm_head), fresh, strict=True):
            mine.copy_(new)
        for held, loaded in zip(self.layers, layers, strict=True):
            for kept, value in zip(held.tensors(), loaded.tensors(), strict=True):
                if kept is not None:
                    kept.copy_(value)

    @overload
    def _cast(self, tensor: torch.Tensor) -> torch.Tensor: ...
    @overload
    def _cast(self, tensor: None) -> None: ...
    def _cast(self, tensor: torch.Tensor | None) -> torch.Tensor | None:
        """A copy of `tensor` on the engine's device in its dtype (None stays None)."""
        if tensor is None:
            return None
        return tensor.to(self.device, self.dtype, copy=True).contiguous()

    @torch.no_grad()
    def generate(
        self,
        prompts: list[list[int]],
        max_new_tokens: int,
        sampling: Sampling,
        eos_ids: list[int],
        pad_id: int,
    ) -> Decoded:
        """Complete each prompt (token ids) with at most `max_new_tokens` tokens."""
        longest = max(len(p) for p in prompts)
        length = math.ceil((longest + max_new_tokens) / CACHE_LENGTH_MULTIPLE)
        length *= CACHE_LENGTH_MULTIPLE
        if length > self.cos.shape[0]:
            raise ArgenError(
                f"prompt of {longest} tokens + {max_new_tokens} new exceeds the model's "
                f"{self.cos.shape[0]} positions"
            )
        batch = self._batch(len(prompts), length, max_new_tokens, sampling, eos_ids, pad_id)
        self._prefill(batch, prompts, longest, pad_id)
        done = 1
        while done < max_new_tokens:
            for _ in range(min(EXIT_CHECK_EVERY, max_new_tokens - done)):
                self._replay(batch)
                done += 1
            if bool(batch.finished.all()):
                break
        return _decoded(batch, done, set(eos_ids))

    def _batch(self, size, length, new_tokens, sampling, eos_ids, pad_id) -> _Batch:
        """The buffers (and, on a GPU, the captured graph) for this batch shape, kept for reuse."""
        key = (size, length, new_tokens, sampling, tuple(eos_ids), pad_id)
        if key in self.batches:
            return self.batches[key]
        while len(self.batches) >= KEPT_GRAPHS:
            self.batches.pop(next(iter(self.batches)))
        dev = self.device
        cache_shape = (size, self.kv_heads, length, self.head_dim)
        batch = _Batch(
            token=torch.zeros(size, dtype=torch.long, device=dev),
            position=torch.zeros(size, dtype=torch.long, device=dev),
            slot=torch.zeros(1, dtype=torch.long, device=dev),
            step=torch.zeros(1, dtype=torch.long, device=dev),
            finished=torch.zeros(size, dtype=torch.bool, device=dev),
            key_valid=torch.zeros(size, length, dtype=torch.bool, device=dev),
            out_tokens=torch.full((size, new_tokens), pad_id, dtype=torch.long, device=dev),
            out_logprobs=torch.zeros(size, new_tokens, dtype=torch.float32, device=dev),
            keys=[torch.zeros(cache_shape, dtype=self.dtype, device=dev) for _ in self.layers],
            values=[torch.zeros(cache_shape, dtype=self.dtype, device=dev) for _ in self.layers],
            eos=torch.tensor(eos_ids, dtype=torch.long, device=dev),
            pad=pad_id,
            sampling=sampling,
        )
        if self.use_graphs:  # warm-up draws random numbers: a seeded call must not see that
            with torch.random.fork_rng(devices=[self.device]):
                self._capture(batch)
        self.batches[key] = batch
        return batch

    def _capture(self, batch: _Batch) -> None:
        """Compile (warm-up on a side stream) and capture one decode step as a CUDA graph.
        Warm-up steps write at the cache's last slot and output 0; prefill resets both."""
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):
                batch.slot.fill_(batch.key_valid.shape[1] - 1)
                batch.step.zero_()
                self._decode_step(batch)
        torch.cuda.current_stream().wait_stream(stream)
        batch.slot.fill_(batch.key_valid.shape[1] - 1)
        batch.step.zero_()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self._decode_step(batch)
        batch.graph = graph

    def _replay(self, batch: _Batch) -> None:
        """One decode step: the captured graph on a GPU, eager code on a CPU."""
        if batch.graph is not None:
            batch.graph.replay()
        else:
            self._decode_step(batch)

    def _prefill(self, batch: _Batch, prompts: list[list[int]], longest: int, pad_id: int):
        """Run the left-padded prompts through the model, fill the cache, pick the first token."""
        size, dev = len(prompts), self.device
        ids = torch.full((size, longest), pad_id, dtype=torch.long)
        valid = torch.zeros(size, longest, dtype=torch.bool)
        for row, prompt in enumerate(prompts):
            ids[row, longest - len(prompt) :] = torch.tensor(prompt)
            valid[row, longest - len(prompt) :] = True
        ids, valid = ids.to(dev), valid.to(dev)
        positions = (valid.long().cumsum(-1) - 1).clamp(min=0)
        causal = torch.ones(longest, longest, dtype=torch.bool, device=dev).tril()
        eye = torch.eye(longest, dtype=torch.bool, device=dev)
        mask = (causal & valid[:, None, :]) | eye  # a padding query sees itself: no empty rows
        slots = torch.arange(longest, device=dev)
        x = F.embedding(ids, self.embed)
        cos, sin = self.cos[positions][:, None], self.sin[positions][:, None]
        for i, weights in enumerate(self.layers):
            x = layer(x, cos, sin, *self._args(weights, batch, i, slots, mask[:, None]))
        batch.key_valid.zero_()
        batch.key_valid[:, :longest] = valid
        batch.finished.zero_()
        batch.out_tokens.fill_(batch.pad)
        batch.out_logprobs.zero_()
        batch.step.zero_()
        token, logprob = head(x[:, -1], *self._head_args(batch))
        batch.out_tokens[:, 0] = token
        batch.out_logprobs[:, 0] = logprob
        batch.finished.copy_(torch.isin(token, batch.eos))
        batch.token.copy_(token)
        batch.position.copy_(positions[:, -1] + 1)
        batch.slot.fill_(longest)
        batch.step.fill_(1)

    def _args(
        self, weights: Layer, batch: _Batch, index: int, slots: torch.Tensor, mask: torch.Tensor
    ) -> tuple:
        """A layer's arguments after x, cos and sin, as plain tensors and numbers, so one compiled
        graph serves all."""
        return (
            *weights.tensors(),
            batch.keys[index],
            batch.values[index],
            self.heads,
            self.kv_heads,
            self.head_dim,
            self.eps,
            slots,
            mask,
        )

    def _head_args(self, batch: _Batch) -> tuple:
        """The sampling head's arguments as plain tensors and numbers."""
        s = batch.sampling
        return self.norm, self.lm_head, self.eps, s.temperature, s.top_p, s.top_k

    def _decode_step(self, batch: _Batch) -> None:
        """One token for every row; only device tensors change, so it can be graph-captured."""
        batch.key_valid.index_fill_(1, batch.slot, True)
        x = F.embedding(batch.token[:, None], self.embed)
        cos, sin = self.cos[batch.position][:, None, None], self.sin[batch.position][:, None, None]
        mask = batch.key_valid[:, None, None, :]
        for i, weights in enumerate(self.layers):
            x = self.layer_step(x, cos, sin, *self._args(weights, batch, i, batch.slot, mask))
        token, logprob = self.head_step(x[:, -1], *self._head_args(batch))
        token = torch.where(batch.finished, batch.pad, token)
        logprob = torch.where(batch.finished, 0.0, logprob)
        batch.out_tokens.index_copy_(1, batch.step, token[:, None])
        batch.out_logprobs.index_copy_(1, batch.step, logprob[:, None])
        batch.finished |= torch.isin(token, batch.eos)
        batch.token.copy_(token)
        batch.position.add_(1)
        batch.slot.add_(1)
        batch.step.add_(1)


def completion_length(tokens: list[int], eos_ids) -> int:
    """Tokens up to and including the first end-of-sequence token (all when none ends it)."""
    return next((i + 1 for i, t in enumerate(tokens) if t in eos_ids), len(tokens))


def _decoded(batch: _Batch, steps: int, eos_ids: set[int]) -> Decoded:
    """The first `steps` output tokens of each row, cut after its end-of-sequence token."""
    tokens = batch.out_tokens[:, :steps].tolist()
    logprobs = batch.out_logprobs[:, :steps].tolist()
    ends = [completion_length(row, eos_ids) for row in tokens]
    return Decoded(
        [row[:end] for row, end in zip(tokens, ends, strict=True)],
        [row[:end] for row, end in zip(logprobs, ends, strict=True)],
    )
