"""Batched generation with a Hugging Face causal LM: left padding, length-sorted batches,
seeded sampling or greedy decoding, stopping at EOS; per item tokens, truncation and time."""

import logging
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerBase

from argen.config import GenerationConfig
from argen.errors import ArgenError
from argen.generation.engine import Engine, Sampling, unsupported_reason
from argen.generation.prompting import chat_messages, sampling_kwargs, system_prompt

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Generated:
    """One response and what it cost."""

    response: str
    n_prompt_tokens: int
    n_response_tokens: int
    truncated: bool
    """Stopped at max_new_tokens without an end-of-sequence token."""
    seconds: float
    """This item's share of its batch's wall time."""


def pick_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def dtype_for(precision: str, device: torch.device) -> torch.dtype:
    """The weights' dtype for `precision` on `device`: a CPU always computes in float32."""
    return getattr(torch, precision) if device.type == "cuda" else torch.float32


def load_model(model_dir: Path, device: torch.device | None = None, precision: str = "bfloat16"):
    """Model (`precision` on a GPU, float32 on CPU, eval mode) and a left-padding tokenizer."""
    device = device or pick_device()
    dtype = dtype_for(precision, device)
    try:
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype)
    except (OSError, ValueError) as exc:
        raise ArgenError(f"cannot load model from {model_dir}: {exc}") from exc
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    # transformers wraps PreTrainedModel.to with functools.wraps, which loses the bound self
    return model.to(device).eval(), tokenizer  # type: ignore[arg-type]


_ENGINES: "weakref.WeakKeyDictionary[object, dict[torch.dtype, Engine]]" = (
    weakref.WeakKeyDictionary()
)


def wants_engine(choice: str, model_config, on_gpu: bool) -> bool:
    """Whether generation goes through the fast engine: 'fast' insists, 'auto' uses it on a GPU
    when the model is supported, 'transformers' never does."""
    if choice == "transformers":
        return False
    reason = unsupported_reason(model_config)
    if choice == "fast":
        if reason:
            raise ArgenError(f"generation.engine is 'fast' but {reason}; use 'transformers'")
        return True
    if on_gpu and reason:
        log.warning("fast engine unavailable (%s); generating with transformers", reason)
    return on_gpu and reason is None


def engine_for(model, dtype: torch.dtype | None = None) -> Engine:
    """The fast engine kept for `model` in `dtype` (default: the model's own), holding its
    current weights. Rollouts and validation of one policy thus get separate engines."""
    dtype = dtype or model.get_input_embeddings().weight.dtype
    engines = _ENGINES.setdefault(model, {})
    engine = engines.get(dtype)
    if engine is None:
        engine = engines[dtype] = Engine.for_model(model, dtype)
    else:
        engine.load(model)
    return engine


def encode_prompts(
    tokenizer: PreTrainedTokenizerBase, prompts: Sequence[str], system: str
) -> list[list[int]]:
    """Token ids of each prompt in chat form after `system`, ending with the assistant turn's
    opening."""
    return [
        # with tokenize=True and return_dict=False, one conversation gives its token ids
        cast(
            list[int],
            tokenizer.apply_chat_template(
                chat_messages(p, system),
                add_generation_prompt=True,
                tokenize=True,
                return_dict=False,
            ),
        )
        for p in prompts
    ]


def generate(
    model,
    tokenizer: PreTrainedTokenizerBase,
    prompts: Sequence[str],
    settings: GenerationConfig,
    on_batch: Callable[[int], None] | None = None,
) -> list[Generated]:
    """Generate one response per prompt, in the prompts' order.

    Prompts are batched by length (less padding); each batch is seeded from `settings.seed` and
    its position, so the same settings give the same responses. The fast engine computes in
    `settings.precision`; plain `generate` in the model's own dtype.
    """
    encoded = encode_prompts(tokenizer, prompts, system_prompt(settings))
    order = sorted(range(len(prompts)), key=lambda i: (len(encoded[i]), i))
    results: list[Generated | None] = [None] * len(prompts)
    eos_ids = _eos_ids(tokenizer, model)
    run_batch = _generate_batch
    weights = model.get_input_embeddings().weight
    on_gpu = weights.device.type == "cuda"
    if wants_engine(settings.engine, model.config, on_gpu):
        engine = engine_for(model, dtype_for(settings.precision, weights.device))
        run_batch = lambda *args: _engine_batch(engine, *args)  # noqa: E731
    for number, start in enumerate(range(0, len(order), settings.batch_size)):
        batch = order[start : start + settings.batch_size]
        torch.manual_seed(settings.seed + number)
        for index, item in zip(
            batch,
            run_batch(model, tokenizer, [encoded[i] for i in batch], settings, eos_ids),
            strict=True,
        ):
            results[index] = item
        if on_batch:
            on_batch(len(batch))
    return results  # type: ignore[return-value]


def _eos_ids(tokenizer, model) -> set[int]:
    ids = model.generation_config.eos_token_id
    ids = set(ids if isinstance(ids, list) else [ids] if ids is not None else [])
    return ids | {tokenizer.eos_token_id}


@torch.inference_mode()
def _generate_batch(
    model, tokenizer, batch: list[list[int]], settings: GenerationConfig, eos_ids: set[int]
) -> list[Generated]:
    start = time.perf_counter()
    padded = tokenizer.pad({"input_ids": batch}, return_tensors="pt", padding=True)
    padded = {k: v.to(model.device) for k, v in padded.items()}
    output = model.generate(
        **padded,
        max_new_tokens=settings.max_new_tokens,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=sorted(eos_ids),
        **sampling_kwargs(settings),
    )
    new_tokens = output[:, padded["input_ids"].shape[1] :].tolist()
    return _results(tokenizer, batch, new_tokens, settings, eos_ids, start)


def _engine_batch(
    engine: Engine, model, tokenizer, batch: list[list[int]], settings, eos_ids: set[int]
) -> list[Generated]:
    start = time.perf_counter()
    sampling = Sampling(settings.temperature, settings.top_p, settings.top_k or 0)
    decoded = engine.generate(
        batch, settings.max_new_tokens, sampling, sorted(eos_ids), tokenizer.pad_token_id
    )
    return _results(tokenizer, batch, decoded.tokens, settings, eos_ids, start)


def _results(tokenizer, batch, new_tokens, settings, eos_ids, start: float) -> list[Generated]:
    """Responses cut at the first end-of-sequence token; each with its share of the time."""
    share = (time.perf_counter() - start) / len(batch)
    results = []
    for prompt_ids, tokens in zip(batch, new_tokens, strict=True):
        end = next((i for i, t in enumerate(tokens) if t in eos_ids), None)
        body = tokens if end is None else tokens[:end]
        results.append(
            Generated(
                response=tokenizer.decode(body, skip_special_tokens=True).strip(),
                n_prompt_tokens=len(prompt_ids),
                n_response_tokens=len(body),
                truncated=end is None and len(tokens) >= settings.max_new_tokens,
                seconds=share,
            )
        )
    return results
