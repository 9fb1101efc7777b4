import math

import pytest
import torch
from datasets import Dataset
from transformers import Trainer, TrainerCallback, TrainingArguments

from argen.config import TrainConfig
from argen.errors import ArgenError
from argen.training.divergence import MAX_CONSECUTIVE, NonFiniteGuard


class Line(torch.nn.Module):
    """y = w.x + b with a squared loss: the smallest model transformers' Trainer trains."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(2, 1)

    def forward(self, x, labels):
        return {"loss": ((self.linear(x).squeeze(-1) - labels) ** 2).mean()}


class PoisonSteps(TrainerCallback):
    """Makes the gradients of the given steps (1-based) NaN, and keeps the weights after each."""

    def __init__(self, model: Line, steps: set[int]):
        self.model, self.steps, self.weights = model, steps, []
        for param in model.parameters():
            param.register_hook(self._poison)
        self.step = 0

    def _poison(self, grad):
        return grad * math.nan if self.step in self.steps else grad

    def on_step_begin(self, args, state, control, **kwargs):
        self.step = state.global_step + 1

    def on_step_end(self, args, state, control, **kwargs):
        self.weights.append(self.model.linear.weight.detach().clone())


def train(tmp_path, poisoned: set[int], steps: int = 8, share: float = TrainConfig().skipped_share):
    torch.manual_seed(0)
    model = Line()
    data = Dataset.from_dict({"x": [[1.0, 2.0], [0.5, -1.0]] * 8, "labels": [3.0, -1.0] * 8})
    args = TrainingArguments(
        output_dir=str(tmp_path),
        max_steps=steps,
        per_device_train_batch_size=2,
        learning_rate=0.05,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
    )
    poison = PoisonSteps(model, poisoned)
    trainer = Trainer(model=model, args=args, train_dataset=data)
    trainer.add_callback(poison)
    trainer.add_callback(NonFiniteGuard(share))
    trainer.train()
    return model, poison.weights, [r for r in trainer.state.log_history if "grad_norm" in r]


def test_a_non_finite_step_is_skipped_and_training_goes_on(tmp_path):
    model, weights, log = train(tmp_path, poisoned={3})
    assert torch.equal(weights[2], weights[1])  # step 3 left the weights as step 2 did
    assert not torch.equal(weights[3], weights[2])  # step 4 trained again
    assert all(torch.isfinite(p).all() for p in model.parameters())
    assert [r["skipped_steps"] for r in log] == [0, 0, 1, 1, 1, 1, 1, 1]
    assert math.isnan(log[2]["grad_norm"])


def test_repeated_non_finite_steps_stop_training(tmp_path):
    poisoned = set(range(2, 2 + MAX_CONSECUTIVE))
    with pytest.raises(ArgenError, match=f"diverged at step {1 + MAX_CONSECUTIVE}"):
        train(tmp_path, poisoned)


def test_scattered_skips_beyond_the_share_stop_training(tmp_path):
    with pytest.raises(ArgenError, match="4 steps with a non-finite gradient.*train.skipped_share"):
        train(tmp_path, poisoned={2, 4, 6, 8}, steps=10)


def test_a_larger_share_lets_scattered_skips_through(tmp_path):
    """train.skipped_share 0.5: four scattered skips in ten steps train on, each one skipped."""
    model, weights, log = train(tmp_path, poisoned={2, 4, 6, 8}, steps=10, share=0.5)
    assert [r["skipped_steps"] for r in log][-1] == 4
    assert torch.equal(weights[7], weights[6])  # step 8 left the weights as step 7 did
    assert all(torch.isfinite(p).all() for p in model.parameters())
