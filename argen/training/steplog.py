"""The training console: transformers' progress bar with one compact log line per training step
in place of the raw metric dict transformers prints at every log, and TRL's per-step rich table
of sample completions only with -v. Kept apart from `argen.console`, which must stay light."""

import logging
import time

from transformers import PrinterCallback, ProgressCallback
from trl.trainer import grpo_trainer

from argen.console import duration, step_line

log = logging.getLogger(__name__)

_PRINT_SAMPLE = grpo_trainer.print_prompt_completions_sample


class StepLines(ProgressCallback):
    """A training bar (unless ``disable_tqdm``) and, at each log, one line: step, mean reward
    per dimension, KL, seconds per step (a supervised step: its loss). The whole dict goes to
    the debug log (-v)."""

    def on_train_begin(self, args, state, control, **kwargs):
        if not args.disable_tqdm:
            super().on_train_begin(args, state, control, **kwargs)
            if self.training_bar is not None:
                self.training_bar.set_description("train")
        self.last = (time.perf_counter(), state.global_step)

    def on_step_end(self, args, state, control, **kwargs):
        if self.training_bar is not None:
            super().on_step_end(args, state, control, **kwargs)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        log.debug("step %d metrics: %s", state.global_step, logs)
        now = time.perf_counter()
        since, step = getattr(self, "last", (now, state.global_step))
        seconds = (now - since) / max(state.global_step - step, 1)
        if any(key.startswith("rewards/") for key in logs):
            log.info(step_line(state.global_step, state.max_steps, logs, seconds))
            self.last = (now, state.global_step)
        elif "loss" in logs:  # a supervised step (the warm start): its loss is the story
            log.info(
                "sft: step %d/%d  loss %.4f  %.1f s/step",
                state.global_step,
                state.max_steps,
                logs["loss"],
                seconds,
            )
            self.last = (now, state.global_step)
        elif "train_runtime" in logs:
            log.info("train: %d steps in %s", state.global_step, duration(logs["train_runtime"]))

    def on_train_end(self, args, state, control, **kwargs):
        if self.training_bar is not None:
            super().on_train_end(args, state, control, **kwargs)


def _print_sample_when_verbose(*args, **kwargs) -> None:
    """TRL's rich table of sampled completions (printed past the log handlers), only with -v:
    the same completions are saved under ``completions/`` in any case."""
    if logging.getLogger("argen").isEnabledFor(logging.DEBUG):
        _PRINT_SAMPLE(*args, **kwargs)


def use_step_lines(trainer):
    """Give `trainer` the compact console and return it: StepLines replaces transformers'
    printer (the raw dict per log, with or without a bar), and TRL's sample table waits for -v."""
    for printer in (ProgressCallback, PrinterCallback):
        trainer.remove_callback(printer)
    trainer.add_callback(StepLines())
    grpo_trainer.print_prompt_completions_sample = _print_sample_when_verbose
    return trainer
