"""Merge a LoRA adapter into its base model: a standalone directory plain transformers loads.

The merged model's logits are checked against the adapter model's on a few prompts; a
mismatch beyond the tolerance (relative to the logits' own scale) is an error and nothing is
written.
"""

import json
import logging
from pathlib import Path

import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

from argen.atomic import atomic_dir
from argen.errors import ArgenError
from argen.generation.prompting import FULL_SYSTEM_PROMPT, chat_messages
from argen.hashing import dir_sha256
from argen.models import check_model_dir, check_weights
from argen.outputs import Merged
from argen.version import code_version

log = logging.getLogger(__name__)

CHECK_PROMPTS = (
    "My knee hurts when I climb stairs. Also, which stocks should I buy?",
    "I have crushing chest pain and I'm sweating.",
    "What is a normal resting heart rate?",
)
TOLERANCE = 2e-4
"""Largest allowed logit difference in float32, as a share of the largest logit (at least 1):
float32 rounding grows with depth and logit size (a 1.5B model's merged logits differed by
2.7e-3 at logits near 20 on a GPU), while a wrong merge moves logits by whole units."""


def allowed_difference(scale: float) -> float:
    """The largest logit difference a merge may show where the largest logit is `scale`."""
    return TOLERANCE * max(scale, 1.0)


def check_adapter_dir(path: Path) -> None:
    """Fail clearly unless `path` holds an adapter whose files are whole."""
    if not (path / "adapter_config.json").is_file():
        raise ArgenError(f"adapter directory {path} has no adapter_config.json")
    check_weights(path)  # a truncated adapter: an error naming the file, not a traceback


def tokenizer_dir(adapter_dir: Path, base_dir: Path) -> Path:
    """The adapter's own tokenizer where training saved one, else the base model's: a published
    adapter may ship without it, since LoRA training leaves the tokenizer unchanged."""
    return adapter_dir if (adapter_dir / "tokenizer_config.json").is_file() else base_dir


@torch.inference_mode()
def max_logit_difference(reference, merged, tokenizer) -> tuple[float, float]:
    """Largest absolute difference of the logits over the check prompts, and the largest
    absolute logit of the reference (their scale)."""
    worst = scale = 0.0
    for prompt in CHECK_PROMPTS:
        ids = tokenizer.apply_chat_template(
            chat_messages(prompt, FULL_SYSTEM_PROMPT),
            add_generation_prompt=True,
            return_tensors="pt",
            return_dict=True,
        )
        a = reference(**ids).logits.float()
        b = merged(**ids).logits.float()
        worst = max(worst, float((a - b).abs().max()))
        scale = max(scale, float(a.abs().max()))
    return worst, scale


def merge(base_dir: Path, adapter_dir: Path, out_dir: Path) -> Path:
    """Write base + adapter as one model (safetensors, tokenizer, chat template, generation
    config) after checking its logits match the adapter model's."""
    check_model_dir(base_dir)
    check_adapter_dir(adapter_dir)
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir(adapter_dir, base_dir))
    base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    adapted = PeftModel.from_pretrained(base, adapter_dir).eval()
    with atomic_dir(out_dir) as tmp:
        merged = adapted.merge_and_unload().eval()
        check = PeftModel.from_pretrained(
            AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32), adapter_dir
        ).eval()
        difference, scale = max_logit_difference(check, merged, tokenizer)
        allowed = allowed_difference(scale)
        if difference > allowed:
            raise ArgenError(
                f"merged model differs from the adapter model by {difference:.2e} in logits "
                f"(allowed {allowed:.2e}: {TOLERANCE:.0e} of the largest logit, {scale:.1f}); "
                "nothing was written"
            )
        merged.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        try:
            GenerationConfig.from_pretrained(base_dir).save_pretrained(tmp)
        except OSError:
            log.info("base model has no generation config to copy")
        manifest = {
            "stage": "merge",
            "code_version": code_version(),
            "base_model": str(base_dir),
            "adapter": str(adapter_dir),
            "adapter_sha256": dir_sha256(adapter_dir),
            "max_logit_difference": difference,
            "tolerance": allowed,
        }
        (tmp / Merged.SIDECAR).write_text(json.dumps(manifest, indent=2) + "\n")
    log.info("merged %s into %s (max logit difference %.2e)", adapter_dir, out_dir, difference)
    return out_dir
