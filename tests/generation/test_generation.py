from typing import get_args

import pytest

from argen.config import GenerationConfig
from argen.generation.generate import (
    _eos_ids,
    _generate_batch,
    encode_prompts,
    generate,
    load_model,
)
from argen.generation.prompting import (
    FULL_SYSTEM_PROMPT,
    SYSTEM_PROMPTS,
    chat_messages,
    sampling_kwargs,
    system_prompt,
)

pytestmark = pytest.mark.slow

PROMPTS = ["What is a fever?", "My knee hurts. Which stocks should I buy?", "Hi"]


@pytest.fixture(scope="module")
def model_and_tokenizer(default_model_dir):
    return load_model(default_model_dir)


def test_chat_messages_use_the_configured_system_prompt():
    assert chat_messages("q", "be kind") == [
        {"role": "system", "content": "be kind"},
        {"role": "user", "content": "q"},
    ]
    assert system_prompt(GenerationConfig(system_prompt="brief")) == SYSTEM_PROMPTS["brief"]
    assert system_prompt(GenerationConfig()) == SYSTEM_PROMPTS[GenerationConfig().system_prompt]
    assert len(SYSTEM_PROMPTS["brief"]) < len(SYSTEM_PROMPTS["full"]) / 2
    # the names the config accepts are exactly the bundled prompts
    assert set(get_args(GenerationConfig.model_fields["system_prompt"].annotation)) == set(
        SYSTEM_PROMPTS
    )
    assert sampling_kwargs(GenerationConfig(temperature=0)) == {"do_sample": False}
    assert sampling_kwargs(GenerationConfig(temperature=0.7, top_p=0.9))["top_p"] == 0.9


def test_responses_keep_prompt_order_and_count_tokens(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    settings = GenerationConfig(max_new_tokens=8, batch_size=2)
    out = generate(model, tokenizer, PROMPTS, settings)
    alone = [generate(model, tokenizer, [p], settings)[0] for p in PROMPTS]
    assert [o.response for o in out] == [a.response for a in alone]  # greedy: batching is exact
    encoded = encode_prompts(tokenizer, PROMPTS, system_prompt(settings))  # the configured one
    assert [o.n_prompt_tokens for o in out] == [len(e) for e in encoded]
    full = generate(
        model, tokenizer, PROMPTS, settings.model_copy(update={"system_prompt": "full"})
    )
    assert all(f.n_prompt_tokens > o.n_prompt_tokens + 50 for f, o in zip(full, out, strict=True))
    assert all(o.n_response_tokens <= 8 and o.seconds > 0 for o in out)


def test_same_seed_same_samples(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    settings = GenerationConfig(max_new_tokens=12, temperature=1.0, top_p=0.95, seed=3)
    first = [g.response for g in generate(model, tokenizer, PROMPTS, settings)]
    again = [g.response for g in generate(model, tokenizer, PROMPTS, settings)]
    other = [
        g.response
        for g in generate(model, tokenizer, PROMPTS, settings.model_copy(update={"seed": 4}))
    ]
    assert first == again
    assert first != other


def test_truncated_flag_both_ways(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    settings = GenerationConfig(max_new_tokens=3)
    batch = encode_prompts(tokenizer, ["What is a fever?"], FULL_SYSTEM_PROMPT)
    eos = _eos_ids(tokenizer, model)
    (cut,) = _generate_batch(model, tokenizer, batch, settings, eos)
    assert cut.truncated and cut.n_response_tokens == 3
    # Make the model's second greedy token an end-of-sequence token: it stops there.
    first_two = tokenizer(cut.response, add_special_tokens=False)["input_ids"][:2]
    (stopped,) = _generate_batch(model, tokenizer, batch, settings, eos | {first_two[1]})
    assert not stopped.truncated and stopped.n_response_tokens == 1
