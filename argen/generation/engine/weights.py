"""What the fast engine can run, and the model as it holds it: weights with LoRA merged and
projections fused, and rotary tables computed by the family's own transformers module."""

from dataclasses import dataclass, fields
from typing import Literal, overload

import torch
from peft.tuners.lora import LoraLayer
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
from transformers.models.qwen2.modeling_qwen2 import Qwen2RotaryEmbedding

from argen.errors import ArgenError

ROTARY = {"llama": LlamaRotaryEmbedding, "qwen2": Qwen2RotaryEmbedding}
"""The families the engine runs, each with the module transformers computes its rotary
embedding with (so every rope type transformers supports gives the model's own tables)."""
LENGTH_DEPENDENT_ROPE = {"dynamic", "longrope"}
"""Rope types whose frequencies change with the sequence length: one fixed table cannot serve."""


def rope_parameters(config) -> dict:
    """The config's rope settings (`rope_parameters`, or the older `rope_scaling`)."""
    return getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}


def unsupported_reason(config) -> str | None:
    """Why the engine cannot run a model of this config (None when it can)."""
    family = getattr(config, "model_type", None)
    if family not in ROTARY:
        return f"model type {family!r} is not one the engine runs ({', '.join(sorted(ROTARY))})"
    rope = rope_parameters(config)
    kind = rope.get("rope_type", "default")
    if kind in LENGTH_DEPENDENT_ROPE:
        return f"rope type {kind!r} changes with the sequence length"
    if kind != "default" and kind not in ROPE_INIT_FUNCTIONS:
        return f"rope type {kind!r} is unknown to the installed transformers"
    if rope.get("partial_rotary_factor", 1.0) != 1.0:
        return "partial rotary embeddings are not supported"
    layer_types = set(getattr(config, "layer_types", None) or ["full_attention"])
    if getattr(config, "use_sliding_window", False) or layer_types != {"full_attention"}:
        return "sliding-window attention is not supported (use_sliding_window must be false)"
    if getattr(config, "hidden_act", "silu") != "silu":
        return f"activation {config.hidden_act!r} is not supported"
    return None


def rotary_tables(config, positions: int, device: torch.device, dtype: torch.dtype):
    """cos and sin (positions, head_dim) in `dtype`, as the model's own rotary module gives them
    (inverse frequencies, rope scaling and attention scaling all by transformers)."""
    rotary = ROTARY[config.model_type](config).to(device)
    with torch.no_grad():
        cos, sin = rotary(
            torch.empty(0, device=device, dtype=dtype),
            torch.arange(positions, device=device)[None],
        )
    return cos[0].contiguous(), sin[0].contiguous()


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
                # peft declares get_delta_weight on each concrete LoraLayer (Linear, ...) only
                layer.get_delta_weight(a)  # type: ignore[attr-defined]
                for a in layer.active_adapters
                if a in layer.lora_A
            )
        weights[_plain_name(name)] = param.detach()
    return weights


def _plain_name(name: str) -> str:
    """A peft parameter's name as the plain model has it."""
    return name.removeprefix("base_model.model.").replace(".base_layer.", ".")


@dataclass
class Layer:
    """One decoder layer's weights; a bias is None where the model has none."""

    in_norm: torch.Tensor
    qkv: torch.Tensor
    qkv_bias: torch.Tensor | None
    o: torch.Tensor
    o_bias: torch.Tensor | None
    post_norm: torch.Tensor
    gate_up: torch.Tensor
    gate_up_bias: torch.Tensor | None
    down: torch.Tensor
    down_bias: torch.Tensor | None

    def tensors(self) -> tuple:
        """The weights in field order (the order the layer kernel takes them)."""
        return tuple(getattr(self, f.name) for f in fields(self))


def layer_weights(weights: dict[str, torch.Tensor], index: int) -> Layer:
    """Layer `index` of `weights` (plain names), q/k/v and gate/up projections fused."""
    p = f"model.layers.{index}."
    attn, mlp = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"], ["mlp.gate_proj"]
    return Layer(
        in_norm=weights[p + "input_layernorm.weight"],
        qkv=_fused(weights, p, attn, "weight"),
        qkv_bias=_fused(weights, p, attn, "bias"),
        o=weights[p + "self_attn.o_proj.weight"],
        o_bias=weights.get(p + "self_attn.o_proj.bias"),
        post_norm=weights[p + "post_attention_layernorm.weight"],
        gate_up=_fused(weights, p, [*mlp, "mlp.up_proj"], "weight"),
        gate_up_bias=_fused(weights, p, [*mlp, "mlp.up_proj"], "bias"),
        down=weights[p + "mlp.down_proj.weight"],
        down_bias=weights.get(p + "mlp.down_proj.bias"),
    )


@overload
def _fused(weights, prefix: str, names: list[str], kind: Literal["weight"]) -> torch.Tensor: ...
@overload
def _fused(
    weights, prefix: str, names: list[str], kind: Literal["bias"]
) -> torch.Tensor | None: ...
def _fused(weights, prefix: str, names: list[str], kind: str) -> torch.Tensor | None:
    """The `kind` tensors of projections `names` concatenated (None when no bias is there)."""
    parts = [weights.get(f"{prefix}{name}.{kind}") for name in names]
    if kind == "bias" and all(part is None for part in parts):
        return None
    if any(part is None for part in parts):
        raise ArgenError(f"{prefix}: {kind} missing for some of {', '.join(names)}")
    return torch.cat(parts)
