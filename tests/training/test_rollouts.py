"""GRPO rollouts through the fast engine inside TRL's trainer (CPU): the packaged model (slow)
and tiny random models shaped like Llama-3.2-1B and Qwen2.5 (fast)."""

import json

import pandas as pd
import pytest
import torch
from peft import LoraConfig
from transformers import AutoTokenizer
from trl import GRPOTrainer

from argen.generation.prompting import FULL_SYSTEM_PROMPT
from argen.training.rollouts import engine_rollouts
from argen.training.train import grpo_args, train, training_dataset
from tests.conftest import scenario
from tests.tiny_models import FAMILIES, one_thread, tiny_model
from tests.training.test_train import PROMPTS, split_file, tiny


@pytest.mark.parametrize("name", [pytest.param("smollm2", marks=pytest.mark.slow), *FAMILIES])
def test_rollout_logprobs_match_the_trainers_recomputation(name, request, tmp_path):
    if name == "smollm2":
        model_dir = request.getfixturevalue("default_model_dir")
        model, tokenizer = str(model_dir), AutoTokenizer.from_pretrained(model_dir)
        check_rollouts(model, tokenizer, tmp_path)
        return
    with one_thread():
        check_rollouts(*tiny_model(name), tmp_path)


def check_rollouts(model, tokenizer, tmp_path) -> None:
    """Engine rollouts inside a LoRA GRPO trainer of `model` (a directory or a model): the
    trainer's prompts, lengths within the limit, log-probabilities as the trainer computes."""
    config = tiny(tmp_path, "train.temperature=0.8", "train.max_completion_length=12")
    frame = pd.DataFrame([scenario(f"s{i}", p) for i, p in enumerate(PROMPTS)])
    args = grpo_args(config, tmp_path / "run", on_gpu=False)
    args.report_to, args.reward_weights = [], None
    rollout = engine_rollouts(tokenizer)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[lambda completions, **_: [0.0] * len(completions)],
        args=args,
        train_dataset=training_dataset(frame, FULL_SYSTEM_PROMPT),
        processing_class=tokenizer,
        peft_config=LoraConfig(r=4, target_modules=["q_proj", "v_proj"]),
        rollout_func=rollout,
    )
    prompts = [row["prompt"] for row in training_dataset(frame, FULL_SYSTEM_PROMPT)]
    out = rollout(prompts, trainer)
    assert len(out["completion_ids"]) == len(prompts)
    for prompt_ids, messages in zip(out["prompt_ids"], prompts, strict=True):
        assert prompt_ids == tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=True, return_dict=False
        )
    for prompt_ids, completion, logprobs in zip(
        out["prompt_ids"], out["completion_ids"], out["logprobs"], strict=True
    ):
        assert 0 < len(completion) <= 12 and len(logprobs) == len(completion)
        ids = torch.tensor([prompt_ids + completion])
        with torch.no_grad():
            want, _, _ = trainer._get_per_token_logps_and_entropies(
                trainer.model, ids, torch.ones_like(ids), len(completion)
            )
        assert torch.allclose(torch.tensor(logprobs), want[0], atol=1e-4)


@pytest.mark.slow
def test_training_with_fast_rollouts(default_model_dir, tmp_path):
    config = tiny(tmp_path, "generation.engine=fast", "train.max_steps=1")
    out = train(
        config,
        default_model_dir,
        split_file(tmp_path / "train.parquet", "train"),
        split_file(tmp_path / "val.parquet", "validation"),
        tmp_path / "adapter",
    )
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["rollouts"] == "fast" and manifest["steps"] == 1
    assert manifest["judge"]["judged"] == 4 and manifest["judge"]["failures"] == 0
