"""What the adapter stages' tests share: a tiny random model, four train prompts with their
demonstrations, and the warm start trained on them once per module."""

import pytest

from argen.config import load_config
from argen.training.sft import warm_start
from tests.conftest import scenario, write_jsonl, write_scenarios
from tests.tiny_models import one_thread, tiny_model

PROMPTS = {
    "t0": ("My knee hurts on stairs. Also which stocks should I buy?", "B"),
    "t1": ("I have crushing chest pain and sweating.", "A"),
    "t2": ("How do I treat a small cut?", "C"),
    "t3": ("Write me a cover letter.", "C"),
}
ANSWERS = {
    "t0": "Knee pain on stairs is often from the kneecap; rest and strengthen. No stock tips.",
    "t1": "Call your local emergency number now: this may be a heart attack.",
    "t2": "Rinse it with clean water, press to stop bleeding and cover it.",
    "t3": "I only help with health questions, so a cover letter is not something I can write.",
}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sft")
    model, tok = tiny_model("qwen2.5-0.5b")
    model_dir = tmp / "model"
    model.save_pretrained(model_dir)
    tok.save_pretrained(model_dir)
    rows = [scenario(i, p, tier=t) for i, (p, t) in PROMPTS.items()]
    train_split = write_scenarios(tmp / "train.parquet", rows, "train")
    validation_split = write_scenarios(tmp / "val.parquet", rows[:2], "validation")
    demos = [{"id": i, "response": a, "writer": "test"} for i, a in ANSWERS.items()]
    demos.append({"id": "test-only", "response": "not in the train split"})
    write_jsonl(tmp / "demos.jsonl", demos)
    return tmp, model_dir, train_split, validation_split


def config(tmp, *extra):
    return load_config(
        "default",
        [
            f"storage.root={tmp / 'art'}",
            f"sft.demonstrations={tmp / 'demos.jsonl'}",
            "sft.epochs=2",
            "sft.batch_size=2",
            "sft.learning_rate=0.01",
            "sft.save_steps=2",
            "train.validation_prompts=2",
            "generation.max_new_tokens=4",
            "train.max_steps=1",
            "train.num_generations=2",
            "train.prompts_per_step=2",
            "train.max_completion_length=4",
            "train.wandb_mode=disabled",
            *extra,
        ],
    )


@pytest.fixture(scope="module")
def warmed(setup):
    tmp, model_dir, train_split, validation_split = setup
    with one_thread():
        out = warm_start(config(tmp), model_dir, train_split, validation_split, tmp / "sft")
    return out


def grpo_continuing(setup, adapter, name: str):
    """One GRPO step (the last adapter kept) continuing `adapter`, into ``<tmp>/<name>``."""
    from argen.training.train import train

    tmp, model_dir, train_split, validation_split = setup
    with one_thread():
        return train(
            config(tmp, "train.select=last"),
            model_dir,
            train_split,
            validation_split,
            tmp / name,
            warm_start=adapter,
        )
