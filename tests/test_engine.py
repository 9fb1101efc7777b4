"""The fast engine against plain transformers, on CPU in float32 with the packaged model."""

import copy
import math

import pytest
import torch
from peft import LoraConfig, get_peft_model
from scipy import stats
from transformers import AutoConfig

from argen.config import GenerationConfig
from argen.engine import (
    Engine,
    Sampling,
    completion_length,
    gumbel_max,
    merged_weights,
    unsupported_reason,
)
from argen.errors import ArgenError
from argen.generation import (
    _eos_ids,
    dtype_for,
    encode_prompts,
    engine_for,
    generate,
    load_model,
    wants_engine,
)

pytestmark = pytest.mark.slow

PROMPTS = [
    "My knee hurts after running, and which stocks should I buy?",
    "What is a fever?",
    "How do I treat a small burn at home?",
    "hi",
]


@pytest.fixture(scope="module")
def loaded(default_model_dir):
    model, tokenizer = load_model(default_model_dir, torch.device("cpu"))
    return model, tokenizer, sorted(_eos_ids(tokenizer, model))


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
    prompts = encode_prompts(tokenizer, PROMPTS)  # mixed lengths: left padding is exercised
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
    prompts = encode_prompts(tokenizer, PROMPTS[:2])
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
    prompts = encode_prompts(tokenizer, PROMPTS[:2])
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

    prompts = encode_prompts(tokenizer, PROMPTS[1:3])
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


def test_engine_choice(loaded, default_model_dir):
    model, _, _ = loaded
    config = AutoConfig.from_pretrained(default_model_dir)
    assert unsupported_reason(config) is None
    assert wants_engine("auto", config, on_gpu=True)
    assert not wants_engine("auto", config, on_gpu=False)
    assert wants_engine("fast", config, on_gpu=False)
    assert not wants_engine("transformers", config, on_gpu=True)
    other = AutoConfig.for_model("gpt2")
    assert "gpt2" in unsupported_reason(other)
    assert not wants_engine("auto", other, on_gpu=True)
    with pytest.raises(ArgenError, match="not Llama-family"):
        wants_engine("fast", other, on_gpu=True)
    with pytest.raises(ArgenError, match="positions"):
        Engine.for_model(model).generate([[1] * 9000], 8, Sampling(0), [2], 2)


def test_one_engine_per_model_and_precision(loaded):
    """Validation asks for float32 while rollouts use the policy's own dtype: two engines, each
    kept and refreshed, and a CPU computes in float32 whatever the precision setting."""
    model, tokenizer, eos = loaded
    own = engine_for(model)
    half = engine_for(model, torch.bfloat16)
    assert own.dtype == torch.float32 and half.dtype == torch.bfloat16
    assert engine_for(model) is own and engine_for(model, torch.bfloat16) is half
    prompts = encode_prompts(tokenizer, PROMPTS[:2])
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
