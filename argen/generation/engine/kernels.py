"""The engine's compute: one decoder layer over a static KV cache, and the sampling head.

Arguments are plain tensors and numbers (a missing bias is None), so that one compiled graph
serves every layer of a model.
"""

import math

import torch
import torch.nn.functional as F


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Llama's and Qwen2's RMSNorm, computed in float32 as Hugging Face does."""
    x32 = x.float()
    x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    return weight * x32.to(x.dtype)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding of `x` (the half-split layout transformers uses)."""
    first, second = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-second, first), dim=-1) * sin


def layer(
    x,
    cos,
    sin,
    in_norm,
    qkv,
    qkv_bias,
    o,
    o_bias,
    post_norm,
    gate_up,
    gate_up_bias,
    down,
    down_bias,
    keys,
    values,
    heads,
    kv_heads,
    head_dim,
    eps,
    slots,
    mask,
) -> torch.Tensor:
    """One decoder layer over `x` (B, T, H); writes its keys and values at cache `slots`.
    Grouped-query attention: `kv_heads` key/value heads serve `heads` query heads."""
    size, length, _ = x.shape
    h = rms_norm(x, in_norm, eps)
    q, k, v = F.linear(h, qkv, qkv_bias).split(
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
    x = x + F.linear(attn.transpose(1, 2).reshape(size, length, heads * head_dim), o, o_bias)
    gate, up = F.linear(rms_norm(x, post_norm, eps), gate_up, gate_up_bias).chunk(2, dim=-1)
    return x + F.linear(F.silu(gate) * up, down, down_bias)


def head(x, norm, lm_head, eps: float, temperature: float, top_p: float, top_k: int):
    """Next token and its log-probability from the last hidden state."""
    logits = F.linear(rms_norm(x, norm, eps), lm_head).float()
    if temperature == 0:
        token = logits.argmax(-1)
        return token, _logprob(logits, token)
    scaled = logits / temperature
    filtered = scaled
    if top_k:
        kth = torch.topk(scaled, top_k, dim=-1).values[:, -1:]
        filtered = filtered.masked_fill(filtered < kth, -math.inf)
    if top_p < 1.0:
        filtered = _top_p(filtered, top_p)
    token = gumbel_max(filtered)
    return token, _logprob(scaled, token)


@torch.compiler.disable
def _top_p(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    """`logits` outside the smallest set of top tokens holding `top_p` of the mass set to -inf.
    Left to eager kernels (still graph-captured): Inductor (torch 2.11) fails to generate code
    for this cumulative sum over a whole vocabulary."""
    ordered, order = torch.sort(logits, dim=-1)
    drop = ordered.softmax(-1).cumsum(-1) <= 1 - top_p
    drop[:, -1] = False
    return logits.scatter(-1, order, ordered.masked_fill(drop, -math.inf))


def gumbel_max(logits: torch.Tensor) -> torch.Tensor:
    """One token per row drawn from softmax(`logits`) (Gumbel-max; -inf logits never win).

    Noise is added to logits rather than dividing probabilities by exponential noise, which
    picks an arbitrary token whenever the noise draws an exact zero.
    """
    uniform = torch.rand_like(logits)  # [0, 1): u = 0 gives -inf noise, a token that never wins
    return (logits - torch.log(-torch.log(uniform))).argmax(-1)


def _logprob(logits: torch.Tensor, token: torch.Tensor) -> torch.Tensor:
    """Log-softmax of `logits` at each row's `token`."""
    return logits.log_softmax(-1).gather(-1, token[:, None])[:, 0]
