"""The fast engine against plain transformers, on CPU in float32: the packaged SmolLM2 (slow)
and tiny random models shaped like Llama-3.2-1B and Qwen2.5-0.5B/1.5B (fast)."""

import copy
import math

import pytest
import torch
from peft import LoraConfig, get_peft_model
from scipy import stats
from transformers import AutoConfig

from argen.config import GenerationConfig
from argen.errors import ArgenError
from argen.generation.engine import (
    Engine,
    Sampling,
    completion_length,
    gumbel_max,
    merged_weights,
    unsupported_reason,
)
from argen.generation.generate import (
    _eos_ids,
    dtype_for,
    encode_prompts,
    engine_for,
    generate,
    load_model,
    wants_engine,
)
from argen.generation.prompting import FULL_SYSTEM_PROMPT
from tests.tiny_models import FAMILIES, one_thread, real_config, tiny_model

MODELS = [pytest.param("smollm2", marks=pytest.mark.slow), *FAMILIES]

PROMPTS = [
    "My knee hurts after running, and which stocks should I buy?",
    "What is a fever?",
    "How do I treat a small burn at home?",
    "hi",
]


@pytest.fixture(scope="module", params=MODELS)
def loaded(request):
    """(model, tokenizer, end-of-sequence ids) of the packaged model or of a tiny family model.

    A random model never emits its end-of-sequence token, so one of its greedy tokens is made
    an extra one: some completions then end early while another runs to the limit.
    """
    if request.param == "smollm2":
        model_dir = request.getfixturevalue("default_model_dir")
        model, tokenizer = load_model(model_dir, torch.device("cpu"))
        yield model, tokenizer, sorted(_eos_ids(tokenizer, model))
        return
    with one_thread():
        model, tokenizer = tiny_model(request.param)
        eos = tokenizer.eos_token_id
        rows = reference(
            model, tokenizer, encode_prompts(tokenizer, PROMPTS, FULL_SYSTEM_PROMPT), [eos], 40
        )
        stop = next(t for t in rows[0][3:] if any(t not in row for row in rows[1:]))
        model.generation_config.eos_token_id = [eos, stop]
        yield model, tokenizer, sorted(_eos_ids(tokenizer, model))


def reference(model, tokenizer, prompts, eos, new_tokens):
    """Greedy completions by `generate`, cut after the first end-of-sequence token."""
    padded = tokenizer.pad({"input_ids": prompts}, return_tensors="pt", padding=True)
    with torch.no_grad():
        out = model.generate(**padded, max_new_tokens=new_tokens, do_sample=False, eos_token_id=eos)
    rows = out[:, padded["input_ids"].shape[1] :].tolist()
    return [r[: completion_length(r, eos)] for r in rows]


def recomputed_logprobs(model, prompt, completion, temperature=1.0):
    """Log-probabilities of `completion`'s tokens from one full forward pass (as a trainer does)."""
    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt) - 1 : -1].float() / temperature
    return logits.log_softmax(-1).gather(-1, torch.tensor(completion)[:, None])[:, 0]


def test_greedy_matches_generate_token_for_token(loaded):
    model, tokenizer, eos = loaded
    prompts = encode_prompts(
        tokenizer, PROMPTS, FULL_SYSTEM_PROMPT
    )  # mixed lengths: left padding is exercised
    decoded = Engine.for_model(model).generate(
        prompts, 40, Sampling(temperature=0), eos, tokenizer.pad_token_id
    )
    expected = reference(model, tokenizer, prompts, eos, 40)
    assert decoded.tokens == expected
    assert any(row[-1] in eos for row in expected) and any(len(row) == 40 for row in expected)
    for prompt, tokens, logprobs in zip(prompts, decoded.tokens, decoded.logprobs, strict=True):
        want = recomputed_logprobs(model, prompt, tokens)
        assert torch.allclose(torch.tensor(logprobs), want, atol=1e-4)


def test_sampled_logprobs_match_recomputation_and_seed_repeats(loaded):
    model, tokenizer, eos = loaded
    prompts = encode_prompts(tokenizer, PROMPTS[:2], FULL_SYSTEM_PROMPT)
    engine = Engine.for_model(model)
    sampling = Sampling(temperature=0.7, top_p=0.9, top_k=50)
    torch.manual_seed(1)
    first = engine.generate(prompts, 16, sampling, eos, tokenizer.pad_token_id)
    torch.manual_seed(1)
    again = engine.generate(prompts, 16, sampling, eos, tokenizer.pad_token_id)
    assert first == again
    for prompt, tokens, logprobs in zip(prompts, first.tokens, first.logprobs, strict=True):
        want = recomputed_logprobs(model, prompt, tokens, temperature=0.7)
        assert torch.allclose(torch.tensor(logprobs), want, atol=1e-4)


def test_top_k_one_and_tiny_top_p_are_greedy(loaded):
    model, tokenizer, eos = loaded
    prompts = encode_prompts(tokenizer, PROMPTS[:2], FULL_SYSTEM_PROMPT)
    engine = Engine.for_model(model)
    greedy = engine.generate(prompts, 12, Sampling(temperature=0), eos, 0).tokens
    assert engine.generate(prompts, 12, Sampling(1.0, 1.0, 1), eos, 0).tokens == greedy
    assert engine.generate(prompts, 12, Sampling(1.0, 1e-6, 0), eos, 0).tokens == greedy


def test_lora_weights_are_merged_and_refreshed_in_place(loaded):
    model, tokenizer, eos = loaded
    plain = merged_weights(model)
    peft_model = get_peft_model(
        copy.deepcopy(model), LoraConfig(r=4, target_modules=["q_proj", "v_proj", "down_proj"])
    )
    torch.manual_seed(0)
    lora_b = [p for name, p in peft_model.named_parameters() if "lora_B" in name]
    with torch.no_grad():
        for param in lora_b:
            param.normal_(std=0.02)
    merged = merged_weights(peft_model)
    assert set(merged) == set(plain)  # plain names, no LoRA parameters
    name = "model.layers.0.self_attn.q_proj.weight"
    assert not torch.equal(merged[name], plain[name])
    assert torch.equal(merged["model.norm.weight"], plain["model.norm.weight"])

    prompts = encode_prompts(tokenizer, PROMPTS[1:3], FULL_SYSTEM_PROMPT)
    engine = Engine.for_model(peft_model)
    greedy = Sampling(temperature=0)
    assert engine.generate(prompts, 12, greedy, eos, 0).tokens == reference(
        peft_model, tokenizer, prompts, eos, 12
    )
    with torch.no_grad():
        for param in lora_b:
            param.mul_(3)
    engine.load(peft_model)
    assert engine.generate(prompts, 12, greedy, eos, 0).tokens == reference(
        peft_model, tokenizer, prompts, eos, 12
    )


def test_generate_through_the_engine_matches_transformers(loaded):
    model, tokenizer, _ = loaded
    settings = GenerationConfig(max_new_tokens=10, batch_size=3)
    fast = generate(model, tokenizer, PROMPTS, settings.model_copy(update={"engine": "fast"}))
    plain = generate(
        model, tokenizer, PROMPTS, settings.model_copy(update={"engine": "transformers"})
    )
    assert [g.response for g in fast] == [g.response for g in plain]
    assert [g.truncated for g in fast] == [g.truncated for g in plain]


def without_family_feature(model):
    """A copy of a tiny model without what sets its family apart: Llama-3 with plain rope
    instead of llama3 scaling, Qwen2 with zero attention biases."""
    other = copy.deepcopy(model)
    if model.config.model_type == "llama":
        theta = model.config.rope_parameters["rope_theta"]
        other.config.rope_parameters = {"rope_type": "default", "rope_theta": theta}
        other.model.rotary_emb = type(model.model.rotary_emb)(other.config)
        return other
    with torch.no_grad():
        for name, param in other.named_parameters():
            if name.endswith(".bias"):
                param.zero_()
    return other


@pytest.mark.parametrize("name", FAMILIES)
def test_tiny_models_keep_what_the_engine_must_get_right(name):
    """The tiny model has its family's structure, and that structure changes greedy tokens: a
    Llama-3 model decoded with plain rope, or a Qwen2 model without its biases, differs."""
    with one_thread():
        model, tokenizer = tiny_model(name)
        real, config = real_config(name), model.config
        assert config.model_type == real["model_type"]
        assert config.num_attention_heads // config.num_key_value_heads == (
            real["num_attention_heads"] // real["num_key_value_heads"]
        )
        untied = "lm_head.weight" in dict(model.named_parameters())
        assert untied == (not config.tie_word_embeddings) == (name.endswith("untied"))
        biases = [p for n, p in model.named_parameters() if n.endswith(".bias")]
        assert all(bool(b.abs().min() > 0) for b in biases)
        assert len(biases) == (3 * config.num_hidden_layers if name.startswith("qwen") else 0)
        if config.model_type == "llama":
            assert config.rope_parameters["rope_type"] == "llama3"
        prompts = encode_prompts(tokenizer, PROMPTS[:2], FULL_SYSTEM_PROMPT)
        eos = [tokenizer.eos_token_id]
        original = reference(model, tokenizer, prompts, eos, 12)
        changed = reference(without_family_feature(model), tokenizer, prompts, eos, 12)
    assert all(a != b for a, b in zip(original, changed, strict=True))


@pytest.mark.parametrize("name", FAMILIES)
def test_auto_picks_the_engine_for_each_family(name):
    config = AutoConfig.for_model(**real_config(name))
    assert unsupported_reason(config) is None
    assert wants_engine("auto", config, on_gpu=True)
    assert not wants_engine("auto", config, on_gpu=False)
    assert wants_engine("fast", config, on_gpu=False)
    assert not wants_engine("transformers", config, on_gpu=True)


@pytest.mark.parametrize(
    ("config", "reason"),
    [
        (AutoConfig.for_model("gpt2"), "model type 'gpt2'"),
        (
            AutoConfig.for_model(**{**real_config("qwen2.5-0.5b"), "use_sliding_window": True}),
            "sliding-window",
        ),
        (
            AutoConfig.for_model(
                **{
                    **real_config("llama-3.2-1b"),
                    "rope_scaling": {"rope_type": "dynamic", "factor": 2.0},
                }
            ),
            "rope type 'dynamic' changes with the sequence length",
        ),
    ],
)
def test_engine_refuses_what_it_cannot_run_with_the_reason(config, reason, caplog):
    assert reason in unsupported_reason(config)
    with caplog.at_level("WARNING", logger="argen.generation.generate"):
        assert not wants_engine("auto", config, on_gpu=True)
    assert reason in caplog.text
    with pytest.raises(ArgenError, match=reason):
        wants_engine("fast", config, on_gpu=True)
    with pytest.raises(ArgenError, match=reason):
        Engine(config, torch.device("cpu"), torch.float32)


def test_prompt_beyond_the_models_positions_is_refused(loaded):
    model, _, _ = loaded
    too_long = [[1] * (model.config.max_position_embeddings + 1)]
    with pytest.raises(ArgenError, match="positions"):
        Engine.for_model(model).generate(too_long, 8, Sampling(0), [2], 2)


def test_one_engine_per_model_and_precision(loaded):
    """Validation asks for float32 while rollouts use the policy's own dtype: two engines, each
    kept and refreshed, and a CPU computes in float32 whatever the precision setting."""
    model, tokenizer, eos = loaded
    own = engine_for(model)
    half = engine_for(model, torch.bfloat16)
    assert own.dtype == torch.float32 and half.dtype == torch.bfloat16
    assert engine_for(model) is own and engine_for(model, torch.bfloat16) is half
    prompts = encode_prompts(tokenizer, PROMPTS[:2], FULL_SYSTEM_PROMPT)
    tokens = half.generate(prompts, 6, Sampling(0), eos, 0).tokens
    assert all(len(t) > 0 for t in tokens)
    assert dtype_for("bfloat16", torch.device("cuda")) == torch.bfloat16
    assert dtype_for("float32", torch.device("cuda")) == torch.float32
    assert dtype_for("bfloat16", torch.device("cpu")) == torch.float32


def test_gumbel_max_draws_from_the_softmax():
    logits = torch.tensor([2.0, 1.0, 0.0, -1.0, -math.inf])
    torch.manual_seed(0)
    draws = gumbel_max(logits.expand(200_000, -1).contiguous())
    counts = torch.bincount(draws, minlength=5)
    assert counts[4] == 0  # a filtered-out token is never drawn
    expected = logits.double().softmax(-1)[:4] * len(draws)
    chi2 = stats.chisquare(counts[:4].double().numpy(), expected.double().numpy())
    assert chi2.pvalue > 0.001
