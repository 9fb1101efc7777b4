"""A Hugging Face sequence-classification reward model as the judge's Helpfulness: read with
its chat template, calibrated, combined with another backend for Ahimsa and Dharma, keyed by
its files' SHA-256; anything else in its place is refused with the reason."""

import asyncio
import json
import math

import pytest
import torch
from transformers import (
    AutoModelForCausalLM,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    BertConfig,
    BertForSequenceClassification,
)

from argen.config import load_config
from argen.errors import ArgenError
from argen.judging import rubric
from argen.judging.base import JudgeFailure, JudgeItem, score_items
from argen.judging.local import LocalJudge
from argen.judging.reader import base_encoder_dir
from argen.judging.reward_model import (
    RewardModelJudge,
    calibrated,
    check_reward_model,
    load_reward_model,
    rewards,
)
from argen.judging.scoring import judge_key, make_backend
from tests.judging.test_cache import VALID, CountingJudge
from tests.tiny_models import one_thread, tiny_config, tokenizer

PAIRS = [
    ("My knee hurts after running.", "Rest it and ice it."),
    ("Crushing chest pain to the jaw.", "Call 112 now: this may be a heart attack. " * 3),
    ("Which stocks should I buy?", ""),
]
"""Pairs of different lengths, so a batch pads them."""


def save_tiny(folder, seed: int = 0, classifier: bool = True, num_labels: int = 1, **tok_args):
    """A tiny random Qwen2-shaped model (a reward model, or a causal LM) with SmolLM2's
    tokenizer (chat template included) saved into `folder`."""
    tok = tokenizer()
    for name, value in tok_args.items():
        setattr(tok, name, value)
    config = tiny_config("qwen2.5-0.5b", len(tok), tok.bos_token_id, tok.eos_token_id)
    config.num_labels = num_labels
    torch.manual_seed(seed)
    kind = AutoModelForSequenceClassification if classifier else AutoModelForCausalLM
    kind.from_config(config).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def reward_dir(tmp_path_factory):
    return save_tiny(tmp_path_factory.mktemp("reward"))


def judge_config(folder, **calibration):
    sets = [f"judge.reward_model.{k}={v}" for k, v in calibration.items()]
    overrides = ["judge.backend=reward_model", f"judge.reward_model.path={folder}", *sets]
    return load_config("default", overrides).judge


@torch.inference_mode()
def one_by_one(folder, pairs, template: bool = True) -> list[float]:
    """Each pair's reward from its own unpadded forward pass, as the model was trained."""
    model, tok = load_reward_model(folder, "test")
    found = []
    for prompt, response in pairs:
        if template:
            messages = [
                {"role": "user", "content": prompt},
                {"role": "assistant", "content": response},
            ]
            ids = tok.apply_chat_template(messages, tokenize=True, return_dict=True)["input_ids"]
        else:
            ids = tok(prompt + response + tok.eos_token)["input_ids"]
        found.append(float(model(input_ids=torch.tensor([ids])).logits[0, 0]))
    return found


def test_batched_rewards_are_each_pairs_own_reward_with_the_chat_template(reward_dir):
    model, tok = load_reward_model(reward_dir, "test")
    with one_thread():
        batched = rewards(model, tok, PAIRS)
        alone = one_by_one(reward_dir, PAIRS)
    assert batched == pytest.approx(alone, abs=1e-5)
    assert len(set(round(r, 4) for r in batched)) == 3  # the texts matter


def test_without_a_chat_template_the_model_reads_prompt_response_and_eos(tmp_path):
    folder = save_tiny(tmp_path / "plain")
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config.pop("chat_template", None)
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    (folder / "chat_template.jinja").unlink(missing_ok=True)
    model, tok = load_reward_model(folder, "plain")
    assert not tok.chat_template
    with one_thread():
        assert rewards(model, tok, PAIRS) == pytest.approx(
            one_by_one(folder, PAIRS, template=False), abs=1e-5
        )


def test_a_cross_encoder_reads_the_pair_as_two_segments(tmp_path):
    """A BERT-style reward model (no chat template, a separator token) gets the text pair."""
    tok = AutoTokenizer.from_pretrained(base_encoder_dir())
    config = BertConfig(
        vocab_size=tok.vocab_size,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        num_labels=1,
    )
    torch.manual_seed(0)
    BertForSequenceClassification(config).save_pretrained(tmp_path / "bert")
    tok.save_pretrained(tmp_path / "bert")
    model, loaded = load_reward_model(check_reward_model(tmp_path / "bert"), "bert")
    with one_thread(), torch.inference_mode():
        alone = [float(model(**tok(p, r, return_tensors="pt")).logits[0, 0]) for p, r in PAIRS]
        assert rewards(model, loaded, PAIRS) == pytest.approx(alone, abs=1e-5)


def test_helpfulness_is_the_calibrated_reward_and_the_rest_the_other_backends(reward_dir):
    judge = RewardModelJudge(judge_config(reward_dir, center=0.5, scale=2.0), CountingJudge())
    model, tok = load_reward_model(reward_dir, judge.sha256)
    items = [JudgeItem(f"s{i}", p, r, "C", "S0") for i, (p, r) in enumerate(PAIRS)]
    with one_thread():
        raw = rewards(model, tok, PAIRS)
        rows = asyncio.run(score_items(judge, items))
    other = rubric.score(VALID, "C", "S0")
    for row, reward in zip(rows, raw, strict=True):
        quality = 1 / (1 + math.exp(-(reward - 0.5) / 2.0))
        assert row["judge_ok"] and row["helpfulness"] == pytest.approx(quality)
        assert [row[f] for f in rubric.HELPFULNESS_FIELDS] == pytest.approx([quality] * 4)
        assert row["ahimsa"] == other["ahimsa"] and row["dharma"] == other["dharma"]
        assert row["judge"] == judge.name


def test_calibration_is_a_sigmoid_around_the_center():
    assert calibrated(1.5, center=1.5, scale=1.0) == 0.5
    assert calibrated(2.5, 1.5, 1.0) == pytest.approx(1 / (1 + math.exp(-1)))
    assert calibrated(2.5, 1.5, 2.0) < calibrated(2.5, 1.5, 1.0)  # a wider scale: gentler
    assert calibrated(-1e6, 0, 1) == 0.0 and calibrated(1e6, 0, 1) == 1.0  # no overflow


def test_a_pair_longer_than_the_model_reads_is_a_failure_not_a_score(tmp_path):
    folder = save_tiny(tmp_path / "short", model_max_length=48)
    model, tok = load_reward_model(folder, "short")
    with one_thread():
        found = rewards(model, tok, PAIRS)
    assert isinstance(found[1], JudgeFailure) and "over the reward model's limit of 48" in str(
        found[1]
    )
    assert isinstance(found[0], float)


def test_the_cache_identity_holds_the_model_files_sha256(tmp_path):
    first = RewardModelJudge(judge_config(save_tiny(tmp_path / "reward")), CountingJudge())
    retrained = save_tiny(tmp_path / "reward", seed=1)  # the same folder, other weights
    second = RewardModelJudge(judge_config(retrained), CountingJudge())
    assert first.identity["sha256"] != second.identity["sha256"]
    assert first.name != second.name and second.name.endswith("+test/counting")
    assert judge_key(judge_config(retrained))["reward_model_sha256"] == second.sha256
    recalibrated = RewardModelJudge(judge_config(retrained, center=1.0), CountingJudge())
    assert recalibrated.identity != second.identity


def test_make_backend_combines_with_the_named_backend(reward_dir):
    backend = make_backend(judge_config(reward_dir))
    assert isinstance(backend, RewardModelJudge) and isinstance(backend.other, LocalJudge)
    assert backend.identity["with"] == LocalJudge().identity


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda d: save_tiny(d, classifier=False), "holds Qwen2ForCausalLM, not a sequence-clas"),
        (lambda d: save_tiny(d, num_labels=3), "has 3 outputs; a reward model has one"),
        (lambda d: d.mkdir() or d, "is not a Hugging Face model directory"),
        (lambda d: d, "is not a directory"),
    ],
    ids=["causal-lm", "three-labels", "empty-folder", "missing"],
)
def test_a_folder_that_is_not_a_reward_model_is_refused(tmp_path, make, problem):
    folder = make(tmp_path / "model")
    with pytest.raises(ArgenError, match=problem):
        make_backend(judge_config(folder))


def test_weights_without_a_score_head_are_refused_not_random(tmp_path):
    """A causal LM's weights under a classifier's config would load with a random head."""
    folder = save_tiny(tmp_path / "relabelled", classifier=False)
    config = json.loads((folder / "config.json").read_text())
    config["architectures"] = ["Qwen2ForSequenceClassification"]
    config["id2label"], config["label2id"] = {"0": "LABEL_0"}, {"LABEL_0": 0}
    (folder / "config.json").write_text(json.dumps(config))
    assert check_reward_model(folder) == folder
    with pytest.raises(ArgenError, match="lack score.weight: its score head would be random"):
        load_reward_model(folder, "relabelled")


def test_the_backend_needs_a_path():
    with pytest.raises(ArgenError, match="needs judge.reward_model.path"):
        load_config("default", ["judge.backend=reward_model"])
