"""Training that survives a rare non-finite gradient and stops on a real divergence.

A single batch can give a NaN or infinite gradient (on a GPU in bfloat16 this happened at steps
13 and 44 of otherwise smooth GRPO runs, gradient norms near 0.5 up to the step before). An
optimizer step on it writes NaNs into the adapter and every later step trains garbage. Like a
mixed-precision loss scaler, `NonFiniteGuard` skips that update instead: the adapter keeps its
last finite weights and training goes on. Repeated non-finite steps are a divergence, not a
glitch, and stop training with an `ArgenError`.

When several ranks train, the gradients checked are the ranks' average, so a NaN alone does not
say which rank made it: with ``per_rank`` each rank also notes its own gradients as backward
computes them (before the average) and, at a skipped step, logs whether they were finite.
"""

import functools
import logging

import torch
from transformers import TrainerCallback

from argen.errors import ArgenError

log = logging.getLogger(__name__)

MAX_CONSECUTIVE = 3
"""Non-finite steps in a row that stop training."""


class Diverged(ArgenError):
    """Training stopped for too many non-finite steps; `skipped_steps` says which (1-based)."""

    def __init__(self, message: str, skipped_steps: list[int]):
        super().__init__(message)
        self.skipped_steps = skipped_steps


class NonFiniteGuard(TrainerCallback):
    """Skips the optimizer update of a step whose (clipped, all-reduced) gradients are not
    finite; counts skipped steps in the training log (``skipped_steps``); stops training after
    `MAX_CONSECUTIVE` in a row or more than `max_share` of the steps so far (at least
    `MAX_CONSECUTIVE` of them; ``train.skipped_share``)."""

    def __init__(self, max_share: float, per_rank: bool = False):
        self.per_rank = per_rank
        self.max_share = max_share
        self.names: list[str] = []
        self.params: list[torch.nn.Parameter] = []
        self.own_bad: torch.Tensor | None = None
        self.skipped_steps: list[int] = []
        self.in_a_row = 0

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        """The trainable parameters (the LoRA weights); with ``per_rank``, a hook on each."""
        self.watch([(n, p) for n, p in model.named_parameters() if p.requires_grad])
        if self.per_rank and self.own_bad is None:
            self.own_bad = torch.zeros(
                len(self.params), dtype=torch.bool, device=self.params[0].device
            )
            for index, param in enumerate(self.params):
                param.register_hook(functools.partial(self._note, index))

    def watch(self, trainable: list[tuple[str, torch.nn.Parameter]]) -> None:
        """The (name, parameter) pairs whose gradients are checked: what a training loop of its
        own (the grader's) calls before it starts, and then `check_step` at every step."""
        self.names = [n for n, _ in trainable]
        self.params = [p for _, p in trainable]

    def _note(self, index: int, grad: torch.Tensor) -> None:
        """This rank's own gradient of parameter `index`, before the ranks average it."""
        assert self.own_bad is not None  # set in on_train_begin, before the hooks are added
        self.own_bad[index] |= ~torch.isfinite(grad).all()

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        """After clipping, before the update: `check_step`."""
        self.check_step(state.global_step + 1)

    def check_step(self, step: int) -> bool:
        """Whether step `step`'s gradients are finite. If any is not, drop every gradient, so
        the optimizer leaves the weights as they are (it skips parameters without a gradient),
        and count the step; too many raise `Diverged`."""
        grads = [p.grad for p in self.params if p.grad is not None]
        finite = not grads or bool(torch.stack([torch.isfinite(g).all() for g in grads]).all())
        own = self._own_non_finite()
        if finite:
            self.in_a_row = 0
            return True
        for param in self.params:
            param.grad = None
        self.skipped_steps.append(step)
        self.in_a_row += 1
        skipped = len(self.skipped_steps)
        log.warning("step %d: gradient not finite, update skipped (%d so far)", step, skipped)
        if own is not None:
            self._report_rank(step, own)
        limit = max(MAX_CONSECUTIVE, self.max_share * step)
        if self.in_a_row >= MAX_CONSECUTIVE or skipped > limit:
            raise Diverged(
                f"training diverged at step {step}: {skipped} steps with a non-finite "
                f"gradient ({self.in_a_row} in a row, more than {self.max_share:.0%} of the steps "
                "allowed by train.skipped_share); lower the learning rate, or look for inputs "
                "that go non-finite at the same steps on every run. Checkpoints before it are "
                "kept for inspection.",
                list(self.skipped_steps),
            )
        return False

    def _own_non_finite(self) -> list[str] | None:
        """The parameters whose gradient this rank computed non-finite this step (None without
        ``per_rank``); the notes start afresh for the next step."""
        if self.own_bad is None:
            return None
        own = [n for n, bad in zip(self.names, self.own_bad.tolist(), strict=True) if bad]
        self.own_bad.zero_()
        return own

    def _report_rank(self, step: int, own: list[str]) -> None:
        """Whether this rank's own gradients, or only their average over the ranks, went bad."""
        if own:
            log.error(
                "this rank's own gradients at step %d are not finite in %d of %d parameters "
                "(first: %s)",
                *(step, len(own), len(self.names), ", ".join(own[:3])),
            )
        else:
            log.error(
                "this rank's own gradients at step %d are finite; their average over the ranks "
                "is not",
                step,
            )

    def on_log(self, args, state, control, logs=None, **kwargs):
        """Every training record says how many updates were skipped so far."""
        if logs is not None and "grad_norm" in logs:
            skipped = len(self.skipped_steps)
            logs["skipped_steps"] = skipped
            if state.log_history and "grad_norm" in state.log_history[-1]:
                state.log_history[-1]["skipped_steps"] = skipped  # the training log's row
