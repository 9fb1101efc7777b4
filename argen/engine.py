"""A fast decoder for Llama-family models, for GRPO rollouts and evaluation on a GPU.

It keeps its own inference copy of the policy with any LoRA weights merged in (refreshed with
`load`), a static KV cache, and, on a GPU, a compiled decode step captured once as a CUDA graph
and replayed for every token, with early exit when every sequence has ended. Plain
`generate` through an unmerged LoRA model is launch-bound on a GPU; this is not. On a CPU the
same code runs eagerly (no compilation, no graphs), which is how the tests check it.
"""

import logging
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from peft.tuners.lora import LoraLayer

from argen.errors import ArgenError

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


def unsupported_reason(config) -> str | None:
    """Why the engine cannot run a model of this config (None when it can)."""
    if getattr(config, "model_type", None) != "llama":
        return f"model type {getattr(config, 'model_type', None)!r} is not Llama-family"
    rope = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
    if rope.get("rope_type", "default") != "default":
        return f"rope type {rope.get('rope_type')!r} is not supported"
    if getattr(config, "attention_bias", False) or getattr(config, "mlp_bias", False):
        return "attention or MLP biases are not supported"
    if getattr(config, "hidden_act", "silu") != "silu":
        return f"activation {config.hidden_act!r} is not supported"
    return None


def merged_weights(model) -> dict[str, torch.Tensor]:
    """Every weight of a causal LM under its plain Hugging Face name, LoRA deltas merged in.

    Works on a plain model and on a peft-wrapped one; the model itself is not modified.
    """
    lora = {name: m for name, m in model.named_modules() if isinstance(m, LoraLayer)}
    weights = {}
    for name, param in model.named_parameters():
        if ".lora_" in name:
            continue
        owner = name.rsplit(".base_layer.", 1)[0] if ".base_layer." in name else None
        if owner in lora and name.endswith("weight"):
            layer = lora[owner]
            param = param.detach() + sum(
                layer.get_delta_weight(a) for a in layer.active_adapters if a in layer.lora_A
            )
        weights[_plain_name(name)] = param.detach()
    return weights


def _plain_name(name: str) -> str:
    """A peft parameter's name as the plain model has it."""
    return name.removeprefix("base_model.model.").replace(".base_layer.", ".")


@dataclass
class _Layer:
    in_norm: torch.Tensor
    qkv: torch.Tensor
    o: torch.Tensor
    post_norm: torch.Tensor
    gate_up: torch.Tensor
    down: torch.Tensor


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
    """Inference copy of a Llama-family policy with a static-cache, graph-captured decoder."""

    def __init__(self, config, device: torch.device, dtype: torch.dtype):
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
        self.layer_step = torch.compile(_layer, dynamic=False) if self.use_graphs else _layer
        self.head_step = torch.compile(_head, dynamic=False) if self.use_graphs else _head
        self.layers: list[_Layer] = []
        self.batches: dict[tuple, _Batch] = {}
        self._rotary_tables(config.max_position_embeddings)

    @classmethod
    def for_model(cls, model, dtype: torch.dtype | None = None) -> "Engine":
        """An engine shaped like `model` on its device, in `dtype` (default: the model's),
        holding its merged weights."""
        embeddings = model.get_input_embeddings().weight
        engine = cls(model.config, embeddings.device, dtype or embeddings.dtype)
        engine.load(model)
        return engine

    def _rotary_tables(self, max_positions: int) -> None:
        rope = getattr(self.config, "rope_parameters", None) or {}
        theta = rope.get("rope_theta", getattr(self.config, "rope_theta", 10000.0))
        exponent = torch.arange(0, self.head_dim, 2, dtype=torch.int64).float() / self.head_dim
        inv_freq = 1.0 / (theta**exponent)
        freqs = torch.arange(max_positions).float()[:, None] * inv_freq[None, :]
        angles = torch.cat((freqs, freqs), dim=-1).to(self.device)
        self.cos = angles.cos().to(self.dtype)
        self.sin = angles.sin().to(self.dtype)

    @torch.no_grad()
    def load(self, model) -> None:
        """Copy `model`'s weights (LoRA merged) in place, so captured graphs see the new ones."""
        weights = merged_weights(model)
        fresh = {
            "embed": weights["model.embed_tokens.weight"],
            "norm": weights["model.norm.weight"],
            "lm_head": weights.get("lm_head.weight", weights["model.embed_tokens.weight"]),
        }
        layers = []
        for i in range(self.config.num_hidden_layers):
            p = f"model.layers.{i}."
            layers.append(
                _Layer(
                    in_norm=weights[p + "input_layernorm.weight"],
                    qkv=torch.cat([weights[p + f"self_attn.{n}_proj.weight"] for n in "qkv"]),
                    o=weights[p + "self_attn.o_proj.weight"],
                    post_norm=weights[p + "post_attention_layernorm.weight"],
                    gate_up=torch.cat(
                        [weights[p + "mlp.gate_proj.weight"], weights[p + "mlp.up_proj.weight"]]
                    ),
                    down=weights[p + "mlp.down_proj.weight"],
                )
            )
        if not self.layers:
            cast = lambda t: t.to(self.device, self.dtype, copy=True).contiguous()  # noqa: E731
            self.embed, self.norm, self.lm_head = (cast(fresh[k]) for k in fresh)
            self.layers = [_Layer(**{k: cast(v) for k, v in vars(x).items()}) for x in layers]
            return
        for mine, new in zip((self.embed, self.norm, self.lm_head), fresh.values(), strict=True):
            mine.copy_(new)
        for mine, new in zip(self.layers, layers, strict=True):
            for key, value in vars(new).items():
                getattr(mine, key).copy_(value)

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
        if self.use_graphs:
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
        for i, layer in enumerate(self.layers):
            x = _layer(x, cos, sin, *self._args(layer, batch, i), slots, mask[:, None])
        batch.key_valid.zero_()
        batch.key_valid[:, :longest] = valid
        batch.finished.zero_()
        batch.out_tokens.fill_(batch.pad)
        batch.out_logprobs.zero_()
        batch.step.zero_()
        token, logprob = _head(x[:, -1], *self._head_args(batch))
        batch.out_tokens[:, 0] = token
        batch.out_logprobs[:, 0] = logprob
        batch.finished.copy_(torch.isin(token, batch.eos))
        batch.token.copy_(token)
        batch.position.copy_(positions[:, -1] + 1)
        batch.slot.fill_(longest)
        batch.step.fill_(1)

    def _args(self, layer: _Layer, batch: _Batch, index: int) -> tuple:
        """A layer's arguments as plain tensors and numbers, so one compiled graph serves all."""
        return (
            layer.in_norm,
            layer.qkv,
            layer.o,
            layer.post_norm,
            layer.gate_up,
            layer.down,
            batch.keys[index],
            batch.values[index],
            self.heads,
            self.kv_heads,
            self.head_dim,
            self.eps,
        )

    def _head_args(self, batch: _Batch) -> tuple:
        s = batch.sampling
        return self.norm, self.lm_head, self.eps, s.temperature, s.top_p, s.top_k

    def _decode_step(self, batch: _Batch) -> None:
        """One token for every row; only device tensors change, so it can be graph-captured."""
        batch.key_valid.index_fill_(1, batch.slot, True)
        x = F.embedding(batch.token[:, None], self.embed)
        cos, sin = self.cos[batch.position][:, None, None], self.sin[batch.position][:, None, None]
        mask = batch.key_valid[:, None, None, :]
        for i, layer in enumerate(self.layers):
            x = self.layer_step(x, cos, sin, *self._args(layer, batch, i), batch.slot, mask)
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


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Llama's RMSNorm, computed in float32 as Hugging Face does."""
    x32 = x.float()
    x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    return weight * x32.to(x.dtype)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    first, second = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-second, first), dim=-1) * sin


def _layer(
    x,
    cos,
    sin,
    in_norm,
    qkv,
    o,
    post_norm,
    gate_up,
    down,
    keys,
    values,
    heads,
    kv_heads,
    head_dim,
    eps,
    slots,
    mask,
) -> torch.Tensor:
    """One decoder layer over `x` (B, T, H); writes its keys and values at cache `slots`."""
    size, length, _ = x.shape
    h = _rms_norm(x, in_norm, eps)
    q, k, v = F.linear(h, qkv).split(
        [heads * head_dim, kv_heads * head_dim, kv_heads * head_dim], dim=-1
    )
    q = _rotate(q.view(size, length, heads, head_dim).transpose(1, 2), cos, sin)
    k = _rotate(k.view(size, length, kv_heads, head_dim).transpose(1, 2), cos, sin)
    keys.index_copy_(2, slots, k)
    values.index_copy_(2, slots, v.view(size, length, kv_heads, head_dim).transpose(1, 2))
    span = mask.shape[-1]
    attn = F.scaled_dot_product_attention(
        q, keys[:, :, :span], values[:, :, :span], attn_mask=mask, enable_gqa=True
    )
    x = x + F.linear(attn.transpose(1, 2).reshape(size, length, heads * head_dim), o)
    gate, up = F.linear(_rms_norm(x, post_norm, eps), gate_up).chunk(2, dim=-1)
    return x + F.linear(F.silu(gate) * up, down)


def _head(x, norm, lm_head, eps: float, temperature: float, top_p: float, top_k: int):
    """Next token and its log-probability from the last hidden state."""
    logits = F.linear(_rms_norm(x, norm, eps), lm_head).float()
    if temperature == 0:
        token = logits.argmax(-1)
        return token, _logprob(logits, token)
    scaled = logits / temperature
    filtered = scaled
    if top_k:
        kth = torch.topk(scaled, top_k, dim=-1).values[:, -1:]
        filtered = filtered.masked_fill(filtered < kth, -math.inf)
    if top_p < 1.0:
        ordered, order = torch.sort(filtered, dim=-1)
        drop = ordered.softmax(-1).cumsum(-1) <= 1 - top_p
        drop[:, -1] = False
        filtered = filtered.scatter(-1, order, ordered.masked_fill(drop, -math.inf))
    token = gumbel_max(filtered)
    return token, _logprob(scaled, token)


def gumbel_max(logits: torch.Tensor) -> torch.Tensor:
    """One token per row drawn from softmax(`logits`) (Gumbel-max; -inf logits never win).

    Noise is added to logits rather than dividing probabilities by exponential noise, which
    picks an arbitrary token whenever the noise draws an exact zero.
    """
    uniform = torch.rand_like(logits)  # [0, 1): u = 0 gives -inf noise, a token that never wins
    return (logits - torch.log(-torch.log(uniform))).argmax(-1)


def _logprob(logits: torch.Tensor, token: torch.Tensor) -> torch.Tensor:
    return logits.log_softmax(-1).gather(-1, token[:, None])[:, 0]


def completion_length(tokens: list[int], eos_ids) -> int:
    """Tokens up to and including the first end-of-sequence token (all when none ends it)."""
    return next((i + 1 for i, t in enumerate(tokens) if t in eos_ids), len(tokens))


def _decoded(batch: _Batch, steps: int, eos_ids: set[int]) -> Decoded:
    tokens = batch.out_tokens[:, :steps].tolist()
    logprobs = batch.out_logprobs[:, :steps].tolist()
    ends = [completion_length(row, eos_ids) for row in tokens]
    return Decoded(
        [row[:end] for row, end in zip(tokens, ends, strict=True)],
        [row[:end] for row, end in zip(logprobs, ends, strict=True)],
    )
