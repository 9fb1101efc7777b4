"""The fast tier reaches the trainer: one real GRPO step (TRL, peft LoRA, the local judge's
rewards), the merge and an evaluation of the merged model, all through the stage table, on a
tiny random model of the Llama family (tests/tiny_models). A TRL or peft API change fails here,
in `make quick`, not only in the slow suite."""

import pandas as pd
import pytest
import torch
from safetensors.torch import load_file

from argen.config import load_config
from argen.outputs import Adapter, Evaluation, Merged
from argen.pipeline import run_stage
from tests.conftest import scenario, write_scenarios
from tests.tiny_models import one_thread, tiny_model

PROMPTS = ["What is a fever?", "How do I treat a small cut?"]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    model, tokenizer = tiny_model("llama-3.2-1b")
    out = tmp_path_factory.mktemp("tiny-llama")
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def test_one_grpo_step_merge_and_evaluation_on_a_tiny_model(tmp_path, tiny_dir):
    config = load_config(
        "default",
        [
            f"storage.root={tmp_path / 'art'}",
            "train.max_steps=1",
            "train.num_generations=2",
            "train.prompts_per_step=2",
            "train.gradient_accumulation_steps=1",
            "train.max_completion_length=4",
            "train.validation_steps=1",
            "train.validation_prompts=2",
            "train.save_steps=1",
            "train.learning_rate=0.05",
            "train.wandb_mode=disabled",
            "generation.max_new_tokens=4",
        ],
    )
    rows = {s: [scenario(f"{s}{i}", p) for i, p in enumerate(PROMPTS)] for s in ("t", "v")}
    train_split = write_scenarios(tmp_path / "train.parquet", rows["t"], "train")
    validation_split = write_scenarios(tmp_path / "validation.parquet", rows["v"], "validation")
    base = {k: v.clone() for k, v in load_file(tiny_dir / "model.safetensors").items()}
    splits = {"train_split": train_split, "validation_split": validation_split}
    with one_thread():
        adapter, reused = run_stage("train", config, model=str(tiny_dir), **splits)
        merged, _ = run_stage("merge", config, model=str(tiny_dir), adapter=adapter)
        test = write_scenarios(tmp_path / "test.parquet", rows["v"], "test")
        evaluation, _ = run_stage("evaluate", config, model=str(merged), scenarios=test, label="a")

    assert not reused
    record = Adapter(adapter).read()
    assert record.stage == "train" and record.steps == 1 and record.files
    log = pd.read_parquet(Adapter(adapter).training_log)
    assert any(c.startswith("rewards/") for c in log.columns)  # the judge's rewards reached TRL
    lora = load_file(adapter / "adapter_model.safetensors")
    lora_b = [v for k, v in lora.items() if "lora_B" in k]
    assert lora_b and any(v.abs().sum() > 0 for v in lora_b)  # one step moved the adapter
    after = load_file(tiny_dir / "model.safetensors")
    assert all(torch.equal(base[k], after[k]) for k in base)  # the base model is untouched
    assert Merged(merged).read().max_logit_difference is not None
    results = pd.read_parquet(Evaluation(evaluation).results)
    assert len(results) == len(PROMPTS) and results["judge_ok"].all()
    assert Evaluation(evaluation).read().stage == "evaluate"
