"""Tiny random models in the shape of real model families, for fast engine tests (no download).

Each JSON here is a published model's config. `tiny_model` keeps what makes the family what it
is (model type, rope type and scaling, attention biases, tied or untied output head, query heads
per key/value head, norm epsilon, sliding-window settings) and shrinks the sizes; the tokenizer
is SmolLM2's (shipped in benchmarks/), with the vocabulary sized to it.
"""

import copy
import functools
import json
from contextlib import contextmanager
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

HERE = Path(__file__).parent
TOKENIZER_DIR = HERE.parent.parent / "benchmarks" / "smollm2_shape"
HEAD_DIM = 8
INIT_STD = 0.1
"""Weights drawn wider than the usual 0.02, so attention (and with it rope and the biases)
visibly shapes the greedy tokens of a random model."""
BIAS_STD = 0.1

FAMILIES = {
    "llama-3.2-1b": ("llama-3.2-1b-instruct.json", {"original_max_position_embeddings": 32}),
    "qwen2.5-0.5b": ("qwen2.5-0.5b-instruct.json", {}),
    "qwen2.5-1.5b-untied": ("qwen2.5-1.5b-instruct.json", {"tie_word_embeddings": False}),
}
"""name: (real config, changes). Llama's rope scaling keeps factor and frequency factors but
takes an original context of 32 positions, so that prompts of ~100 tokens reach far past its
low-frequency wavelength. The 1.5B variant unties the output head: the hub configs tie it,
but the dequantized Qwen2.5-Coder GGUFs the project packages load with their own head (see
shared/NOTES.md), so both head kinds are run."""


def real_config(name: str) -> dict:
    """The published config of family member `name` (as shipped in this folder)."""
    return json.loads((HERE / FAMILIES[name][0]).read_text())


def tiny_config(name: str, vocab_size: int, bos: int, eos: int):
    """`name`'s config, shrunk: 2 layers, 2 key/value heads and the real query-to-key/value
    head ratio, head size 8, vocabulary `vocab_size`."""
    config = real_config(name)
    changes = dict(FAMILIES[name][1])
    if "original_max_position_embeddings" in changes:
        rope = dict(config["rope_scaling"])
        rope["original_max_position_embeddings"] = changes.pop("original_max_position_embeddings")
        config["rope_scaling"] = rope
    ratio = config["num_attention_heads"] // config["num_key_value_heads"]
    config.update(
        num_hidden_layers=2,
        num_key_value_heads=2,
        num_attention_heads=2 * ratio,
        hidden_size=2 * ratio * HEAD_DIM,
        intermediate_size=256,
        vocab_size=vocab_size,
        bos_token_id=bos,
        eos_token_id=eos,
        pad_token_id=eos,
        initializer_range=INIT_STD,
        **changes,
    )
    if "head_dim" in config:
        config["head_dim"] = HEAD_DIM
    return AutoConfig.for_model(**config)


@functools.cache
def _loaded_tokenizer():
    tok = AutoTokenizer.from_pretrained(TOKENIZER_DIR)
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def tokenizer():
    """SmolLM2's tokenizer (chat template included), padding on the left: a copy of one loaded
    once a session (a copy takes a tenth of a second, a load a quarter; tests may change it)."""
    return copy.deepcopy(_loaded_tokenizer())


def tiny_model(name: str, seed: int = 0):
    """A float32 random model of family member `name` in eval mode, with random non-zero
    biases wherever the family has them, and its tokenizer."""
    tok = tokenizer()
    config = tiny_config(name, len(tok), tok.bos_token_id, tok.eos_token_id)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
    with torch.no_grad():
        for param_name, param in model.named_parameters():
            if param_name.endswith(".bias"):
                param.normal_(std=BIAS_STD)
    return model, tok


@contextmanager
def one_thread():
    """Torch on one CPU thread for the block: at these sizes threads only add overhead (about
    4x the CPU time on a busy two-core machine)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
