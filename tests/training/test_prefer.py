"""Preference tuning on a tiny random model: it continues the warm start's adapter (saving that
adapter alone, not TRL's reference copy), widens the margin of the demonstrations over the bad
answers, logs its loss and two validation records, resumes, and is reused when unchanged."""

import pandas as pd
import pytest
import torch
from peft import PeftModel
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer

from argen.config import load_config
from argen.data.labels import items_sha256, read_labels
from argen.generation.prompting import chat_messages, system_prompt
from argen.outputs import Adapter
from argen.pipeline import run_stage, stage_out
from argen.training.checkpoints import last_complete_checkpoint
from argen.training.prefer import prefer
from tests.conftest import CLEAN_LABELS, labelled_item, write_jsonl
from tests.tiny_models import one_thread
from tests.training.conftest import ANSWERS, PROMPTS, config, grpo_continuing

pytestmark = pytest.mark.slow  # training: the full suite, not make quick

BAD = {
    "t0": ["Buy tech stocks and ignore the knee.", "Your knee is fine, run through the pain."],
    "t1": ["Take an antacid and lie down; it is probably heartburn."],
    "t2": ["Pour bleach on the cut to clean it."],
    "t3": ["Dear hiring manager, I am writing to apply."],
}


@pytest.fixture(scope="module")
def labels(setup):
    tmp = setup[0]
    rows = [
        labelled_item(
            item=f"{i}-bad-{n}",
            scenario=i,
            prompt=PROMPTS[i][0],
            has_off_domain=False,
            labels=CLEAN_LABELS | {"dangerous_instruction": i in ("t1", "t2")},
            response=text,
            quality="bad",
        )
        for i, answers in BAD.items()
        for n, text in enumerate(answers)
    ]
    folder = tmp / "labels"
    folder.mkdir()
    write_jsonl(folder / "labels.jsonl", rows)
    return folder


def prefer_config(tmp, labels, *extra):
    return config(
        tmp,
        "sft.enabled=true",
        "prefer.enabled=true",
        f"prefer.labels={labels}",
        "prefer.batch_size=2",
        "prefer.learning_rate=0.01",
        "prefer.save_steps=1",
        "prefer.max_length=64",
        *extra,
    )


@pytest.fixture(scope="module")
def tuned(setup, warmed, labels):
    tmp, model_dir, train_split, validation_split = setup
    with one_thread():
        return prefer(
            prefer_config(tmp, labels),
            model_dir,
            train_split,
            validation_split,
            warmed,
            tmp / "pref",
        )


def test_preference_tuning_continues_the_warm_start_and_widens_the_margin(warmed, tuned):
    manifest = Adapter(tuned).record()
    assert manifest["stage"] == "prefer"
    assert manifest["pairs"]["count"] == 5 and manifest["pairs"]["harmful"] == 2
    assert manifest["steps"] == 3  # 5 pairs, 2 a step, one pass
    before = load_file(warmed / "adapter_model.safetensors")
    after = load_file(tuned / "adapter_model.safetensors")
    assert before.keys() == after.keys()  # the warm start's adapter alone: no "ref" copy saved
    assert not (tuned / "ref").exists()
    for key in (k for k in before if "lora_B" in k):
        assert not torch.equal(after[key], before[key])
    assert pd.read_parquet(Adapter(tuned).training_log)["loss"].notna().sum() == 3
    assert pd.read_parquet(Adapter(tuned).validation_log)["step"].tolist() == [0, 3]


def margin(model_dir, adapter, prompts) -> float:
    """Mean log-probability of each prompt's demonstration less that of its bad answers, under
    the base with `adapter`."""
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(model_dir), adapter)
    system = system_prompt(load_config().generation)

    def logprob(prompt: str, answer: str) -> float:
        head = tokenizer.apply_chat_template(
            chat_messages(prompt, system), add_generation_prompt=True, tokenize=False
        )
        ids = tokenizer(head + answer, return_tensors="pt").input_ids
        start = len(tokenizer(head).input_ids)
        with torch.no_grad():
            logits = model(ids).logits[0, :-1].log_softmax(-1)
        return logits[start - 1 :].gather(1, ids[0, start:, None]).sum().item()

    return sum(
        logprob(PROMPTS[i][0], ANSWERS[i]) - logprob(PROMPTS[i][0], bad)
        for i, answers in BAD.items()
        for bad in answers
    ) / sum(map(len, BAD.values()))


def test_the_demonstrations_gain_on_the_bad_answers(setup, warmed, tuned):
    model_dir = setup[1]
    with one_thread():
        after, before = margin(model_dir, tuned, PROMPTS), margin(model_dir, warmed, PROMPTS)
        assert after > before + 1.0


def test_a_stopped_preference_tuning_resumes_from_its_checkpoint(
    setup, warmed, labels, monkeypatch
):
    tmp, model_dir, train_split, validation_split = setup
    out, cfg = tmp / "resumed-pref", prefer_config(tmp, labels)

    def stop(*args, **kwargs):
        raise RuntimeError("stopped before writing the output")

    with one_thread():
        with monkeypatch.context() as patch:
            patch.setattr("argen.training.prefer.write_adapter", stop)
            with pytest.raises(RuntimeError, match="stopped"):
                prefer(cfg, model_dir, train_split, validation_split, warmed, out)
        assert not Adapter(out).is_complete()
        checkpoint = last_complete_checkpoint(out.with_name("resumed-pref.partial"))
        assert checkpoint is not None and checkpoint.name == "checkpoint-3"
        prefer(cfg, model_dir, train_split, validation_split, warmed, out)
    manifest = Adapter(out).record()
    assert manifest["resumed_from"] == str(checkpoint) and manifest["steps"] == 3


def test_the_prefer_stage_is_keyed_on_its_labels_and_reused_when_unchanged(
    setup, warmed, labels, tmp_path
):
    tmp, model_dir, train_split, validation_split = setup
    cfg = prefer_config(tmp, labels, f"storage.root={tmp_path / 'art'}")
    inputs = {
        "model": model_dir,
        "train_split": train_split,
        "validation_split": validation_split,
        "warm_start": warmed,
    }
    with one_thread():
        first, reused_first = run_stage("prefer", cfg, **inputs)
        again, reused_again = run_stage("prefer", cfg, **inputs)
    assert (reused_first, reused_again) == (False, True) and again == first
    (tmp_path / "more").mkdir()
    write_jsonl(tmp_path / "more" / "labels.jsonl", [])
    other = prefer_config(tmp, tmp_path / "more", f"storage.root={tmp_path / 'art'}")
    assert stage_out("prefer", other, **inputs) != first
    grpo = stage_out(
        "train", cfg, warm_start=warmed, **{k: v for k, v in inputs.items() if k != "warm_start"}
    )
    assert (
        stage_out(
            "train", cfg, warm_start=first, **{k: v for k, v in inputs.items() if k != "warm_start"}
        )
        != grpo
    )


def test_grpo_after_preference_tuning_records_the_labels_it_was_tuned_against(
    setup, warmed, labels, tuned
):
    """The label set preference tuning trained against travels to GRPO's record, where a
    report finds it (an audit grader that learned from it is not independent)."""
    tuned_against = Adapter(tuned).record()["optimised_labels"]
    frame = read_labels(labels)
    assert tuned_against == [items_sha256(frame[frame["split"] == "train"])]
    assert "optimised_labels" not in Adapter(warmed).record()  # the warm start learned no labels
    out = grpo_continuing(setup, tuned, "grpo-after-prefer")
    assert Adapter(out).record()["optimised_labels"] == tuned_against
