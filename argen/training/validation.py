"""Periodic scoring on the validation split during training, and selection of the best adapter.

Validation generates with the evaluation settings (`generation` section, greedy by default) and
judges with the training judge, so the number that picks the adapter is the number the final
evaluation reports, measured on prompts the test split never sees. Each pass applies the
judge-failure policy (`argen.judging.scoring.check_failure_rate`) to its own items: a pass with more
than ``judge.max_failure_rate`` of its judgements failed stops training instead of choosing an
adapter from what is left.

The adapter kept is the one with the best ``objective``: the combined score minus each
`train.penalties` weight times its gaming indicator's rate, the validation twin of the reward.
The policy before the first step is a candidate only when it is itself trained (the warm start
GRPO continues): GRPO then never ships an adapter that validates worse than where it began. An
untrained base is a reference, never kept.
It is written under a temporary name and renamed (its score inside), and its step is recorded
in the history only after that: an interrupted run never leaves a record of a best adapter it
did not finish writing.
"""

import json
import logging
import math
from collections.abc import Mapping
from pathlib import Path

import pandas as pd
import torch
from transformers import Trainer, TrainerCallback

from argen.atomic import atomic_dir, atomic_file
from argen.config import Config, Indicator
from argen.evaluation.indicators import INDICATORS, indicator_columns, indicator_rates
from argen.evaluation.scoring import judge_frame
from argen.generation.generate import generate
from argen.judging.base import Backend
from argen.judging.scoring import check_failure_rate

log = logging.getLogger(__name__)


class ValidationCallback(TrainerCallback):
    """Before training and every `train.validation_steps` steps: score validation prompts, keep
    the best adapter. Each record also holds the reward-hacking indicators, so a choice between
    runs can see how far they rose from the untrained policy's."""

    def __init__(
        self,
        config: Config,
        backend: Backend,
        frame: pd.DataFrame,
        tokenizer,
        best_dir: Path,
        start_is_candidate: bool = False,
    ):
        self.start_is_candidate = start_is_candidate
        limit = config.train.validation_prompts
        self.frame = frame.iloc[:limit] if limit else frame
        self.config = config
        self.backend = backend
        self.tokenizer = tokenizer
        self.best_dir = best_dir
        self.trainer: Trainer | None = None
        self.history_file = best_dir.parent / "validation_history.json"
        self.history: list[dict] = self._load(self.history_file) or []
        self.best = self._load(best_dir / "score.json")

    @staticmethod
    def _load(path: Path):
        """What an interrupted run wrote before it stopped (None when nothing was, or when it
        is not readable: both files are written whole, so that means damage, and the steps
        are scored again)."""
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            return None

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        """Score the untrained policy once: the starting point every later record compares to."""
        if state.global_step == 0:
            self.validate(model, 0)

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if state.global_step % self.config.train.validation_steps == 0:
            self.validate(model, state.global_step)

    def validate(self, model, step: int) -> dict | None:
        """Score the current policy; save it as the best when it beats the previous best. The
        record (None in a process that does not validate, see `RankValidation`)."""
        done = [h for h in self.history if h["step"] == step]
        if done:
            if self._is_best(done[0]):  # recorded, but its adapter was lost to an interruption
                self._save_best(model, done[0])
            return done[0]
        was_training = model.training
        model.eval()
        padding_side = self.tokenizer.padding_side
        self.tokenizer.padding_side = "left"
        try:
            generated = generate(
                model, self.tokenizer, self.frame["prompt"].tolist(), self.config.generation
            )
        finally:
            self.tokenizer.padding_side = padding_side
            model.train(was_training)
        answered = self.frame.assign(response=[g.response for g in generated])
        what = f"validation, step {step}"
        rows = judge_frame(self.config, self.backend, answered, what)
        check_failure_rate(rows, self.config.judge.max_failure_rate, what)
        scores = pd.DataFrame(rows)
        ok = scores[scores["judge_ok"]]
        record = {
            "step": step,
            "n": len(scores),
            "judge_failures": int((~scores["judge_ok"]).sum()),
            "truncation_rate": sum(g.truncated for g in generated) / len(generated),
        }
        for dim in ("ahimsa", "dharma", "helpfulness", "combined"):
            record[dim] = float(ok[dim].mean()) if len(ok) else math.nan
        for name, rate in indicator_rates(indicator_columns(answered)).items():
            record[name] = math.nan if rate["rate"] is None else rate["rate"]
        record["objective"] = objective(record, self.config.train.penalties)
        if self._is_best(record):
            self._save_best(model, record)  # before the record: a recorded best is on disk
        self.history = [h for h in self.history if h["step"] < step] + [record]
        with atomic_file(self.history_file) as tmp:
            tmp.write_text(json.dumps(self.history, indent=2))
        log.info("validation at step %d: combined %.4f", step, record["combined"])
        if self.trainer is not None:
            # transformers' own log: TRL's would take this step's training metrics into the
            # validation record, and the step's own log (loss, gradient norm) must still happen
            should_log = self.trainer.control.should_log
            logs = {f"validation/{k}": v for k, v in record.items() if k != "step"}
            Trainer.log(self.trainer, logs)
            self.trainer.control.should_log = should_log
        torch.manual_seed(self.config.train.seed + step)  # keep rollouts independent of this
        return record

    def _save_best(self, model, record: dict) -> None:
        """Write the adapter and its score under a temporary name, then rename it to `best`:
        an interruption leaves the earlier best or the new one, never a torn one."""
        with atomic_dir(self.best_dir) as tmp:
            model.save_pretrained(tmp)
            (tmp / "score.json").write_text(json.dumps(record, indent=2))
        self.best = record

    def _is_best(self, record: dict) -> bool:
        """The policy at step 0 is a candidate only when it is trained (a warm start)."""
        if (record["step"] == 0 and not self.start_is_candidate) or math.isnan(record["objective"]):
            return False
        return self.best is None or record["objective"] > self.best["objective"]

    def history_frame(self) -> pd.DataFrame:
        return pd.DataFrame(
            self.history,
            columns=[
                "step",
                "n",
                "judge_failures",
                "truncation_rate",
                "ahimsa",
                "dharma",
                "helpfulness",
                "combined",
                *INDICATORS,
                "objective",
            ],
        )

    def selected(self, rule: str) -> dict:
        """What the kept adapter scored on validation, for the manifest."""
        chosen = self.best if rule == "best" and self.best else (self.history or [{}])[-1]
        return {k: chosen.get(k) for k in ("step", "combined", "objective")}


def objective(record: dict, penalties: Mapping[Indicator, float]) -> float:
    """The combined score less each penalty weight times its indicator's rate (none: 0)."""
    rates = {name: record.get(name, math.nan) for name in penalties}
    cost = sum(w * rates[name] for name, w in penalties.items() if not math.isnan(rates[name]))
    return record["combined"] - cost
