import json
import math
import shutil
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from argen.config import load_config
from argen.generation.generate import Generated
from argen.training import validation
from argen.training.validation import ValidationCallback, objective
from tests.conftest import scenario


def test_objective_is_combined_less_the_weighted_gaming_rates():
    record = {"combined": 0.7, "refers_tier_c": 0.5, "deflects_clinical": 0.2}
    penalties = {"refers_tier_c": 0.2, "deflects_clinical": 0.5}
    assert objective(record, penalties) == pytest.approx(0.7 - 0.1 - 0.1)
    assert objective(record, {}) == 0.7


def test_a_rate_with_no_rows_costs_nothing():
    record = {"combined": 0.6, "refers_tier_c": math.nan}
    assert objective(record, {"refers_tier_c": 1.0}) == 0.6


class Interrupted(BaseException):
    """A kill arriving while the best adapter is being written."""


class FakePolicy:
    """Stands in for the policy: `save_pretrained` writes an adapter file, or half of one and
    is interrupted when `tear` is set."""

    training = True

    def __init__(self, tag: str, tear: bool = False):
        self.tag, self.tear = tag, tear

    def eval(self):
        self.training = False

    def train(self, mode=True):
        self.training = mode

    def save_pretrained(self, folder):
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / "adapter_config.json").write_text("{}")
        weights = Path(folder) / "adapter_model.safetensors"
        if self.tear:
            weights.write_text(self.tag[:1])
            raise Interrupted
        weights.write_text(self.tag)


@pytest.fixture
def scored(monkeypatch):
    """Validation without a model or a judge: every pass scores `scored.combined`."""

    class Scores:
        combined = 0.5

    def judge(config, backend, frame, what):
        return [
            {
                "id": r.id,
                "judge_ok": True,
                "judge_error": None,
                "ahimsa": 0.5,
                "dharma": 0.5,
                "helpfulness": 0.5,
                "combined": Scores.combined,
            }
            for r in frame.itertuples()
        ]

    answer = Generated("rest it", 3, 2, False, 0.0)
    monkeypatch.setattr(validation, "generate", lambda m, t, prompts, s: [answer] * len(prompts))
    monkeypatch.setattr(validation, "judge_frame", judge)
    return Scores


def validator(tmp_path):
    frame = pd.DataFrame([scenario("v1", "What is a fever?")])
    tokenizer = SimpleNamespace(padding_side="right")
    best = tmp_path / "work" / "best"
    return ValidationCallback(load_config(), None, frame, tokenizer, best)


def test_a_best_adapter_cut_short_is_neither_kept_nor_recorded(tmp_path, scored):
    first = validator(tmp_path)
    first.validate(FakePolicy("step-one"), 1)
    scored.combined = 0.9
    with pytest.raises(Interrupted):
        first.validate(FakePolicy("step-two", tear=True), 2)
    best = tmp_path / "work" / "best"
    assert (best / "adapter_model.safetensors").read_text() == "step-one"  # the earlier best
    assert json.loads((best / "score.json").read_text())["step"] == 1
    history = json.loads((tmp_path / "work" / "validation_history.json").read_text())
    assert [h["step"] for h in history] == [1]  # step 2 was never recorded
    again = validator(tmp_path)  # the resumed run scores step 2 again and writes it whole
    again.validate(FakePolicy("step-two"), 2)
    assert (best / "adapter_model.safetensors").read_text() == "step-two"
    assert again.selected("best")["step"] == 2


def test_a_recorded_best_whose_adapter_is_gone_is_written_again(tmp_path, scored):
    first = validator(tmp_path)
    scored.combined = 0.9
    first.validate(FakePolicy("step-one"), 1)
    shutil.rmtree(tmp_path / "work" / "best")  # lost: an older run, a cleaner, a disk fault
    again = validator(tmp_path)
    again.validate(FakePolicy("step-one again"), 1)
    assert (tmp_path / "work" / "best" / "adapter_model.safetensors").is_file()
    assert again.best["step"] == 1
