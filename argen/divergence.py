"""Training that survives a rare non-finite gradient and stops on a real divergence.

A single batch can give a NaN or infinite gradient (on a GPU in bfloat16 this happened at steps
13 and 44 of otherwise smooth GRPO runs, gradient norms near 0.5 up to the step before). An
optimizer step on it writes NaNs into the adapter and every later step trains garbage. Like a
mixed-precision loss scaler, `NonFiniteGuard` skips that update instead: the adapter keeps its
last finite weights and training goes on. Repeated non-finite steps are a divergence, not a
glitch, and stop training with an `ArgenError`.
"""

import logging

import torch
from transformers import TrainerCallback

from argen.errors import ArgenError

log = logging.getLogger(__name__)

MAX_CONSECUTIVE = 3
"""Non-finite steps in a row that stop training."""
MAX_SHARE = 0.05
"""Share of the steps so far (at least `MAX_CONSECUTIVE` of them) that stops training."""


class NonFiniteGuard(TrainerCallback):
    """Skips the optimizer update of a step whose (clipped, all-reduced) gradients are not
    finite; counts skipped steps in the training log (``skipped_steps``); stops training after
    `MAX_CONSECUTIVE` in a row or more than `MAX_SHARE` of the steps."""

    def __init__(self):
        self.params: list[torch.nn.Parameter] = []
        self.skipped = 0
        self.in_a_row = 0

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self.params = [p for p in model.parameters() if p.requires_grad]

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        """After clipping, before the update: drop every gradient if any is not finite, so the
        optimizer leaves the weights as they are (it skips parameters without a gradient)."""
        grads = [p.grad for p in self.params if p.grad is not None]
        if not grads or bool(torch.stack([torch.isfinite(g).all() for g in grads]).all()):
            self.in_a_row = 0
            return
        for param in self.params:
            param.grad = None
        self.skipped += 1
        self.in_a_row += 1
        step = state.global_step + 1
        log.warning("step %d: gradient not finite, update skipped (%d so far)", step, self.skipped)
        limit = max(MAX_CONSECUTIVE, MAX_SHARE * step)
        if self.in_a_row >= MAX_CONSECUTIVE or self.skipped > limit:
            raise ArgenError(
                f"training diverged at step {step}: {self.skipped} steps with a non-finite "
                f"gradient ({self.in_a_row} in a row); lower train.learning_rate. Checkpoints "
                "before it are kept for inspection."
            )

    def on_log(self, args, state, control, logs=None, **kwargs):
        """Every training record says how many updates were skipped so far."""
        if logs is not None and "grad_norm" in logs:
            logs["skipped_steps"] = self.skipped
            if state.log_history and "grad_norm" in state.log_history[-1]:
                state.log_history[-1]["skipped_steps"] = self.skipped  # the training log's row
