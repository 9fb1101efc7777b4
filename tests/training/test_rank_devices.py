"""What a training rank puts on which GPU, and how a rank reports a non-finite gradient.

No GPU is needed: the device a rank asks for is checked where it is chosen, and the gradient
report on a small CPU module with hand-made non-finite gradients."""

import logging
import threading

import pytest
import sentence_transformers
import torch
from transformers import TrainerControl, TrainerState

from argen.config import TrainConfig
from argen.judging import embeddings
from argen.training.divergence import NonFiniteGuard


@pytest.mark.parametrize(("local_rank", "expected"), [("1", "cuda:1"), (None, "cuda:0")])
def test_the_judge_encoder_of_a_rank_goes_on_its_gpu_from_a_worker_thread(
    monkeypatch, local_rank, expected
):
    """Rewards are judged in worker threads, where a bare "cuda" means GPU 0 whatever the rank's
    main thread set; rank 1's judge must still land on GPU 1."""
    devices = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    record = lambda path, device, **_: devices.append(device)  # noqa: E731
    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", record)
    if local_rank is None:
        monkeypatch.delenv("LOCAL_RANK", raising=False)
    else:
        monkeypatch.setenv("LOCAL_RANK", local_rank)
    worker = threading.Thread(target=embeddings.encoder.__wrapped__)
    worker.start()
    worker.join()
    assert devices == [expected]


def checked_module():
    """A linear layer with the gradient check installed as the trainer would install it."""
    torch.manual_seed(0)
    module = torch.nn.Linear(3, 2)
    check = NonFiniteGuard(TrainConfig().skipped_share, per_rank=True)
    check.on_train_begin(None, TrainerState(), TrainerControl(), model=module)
    return module, check


def step(check, caplog) -> list[str]:
    """The check's reports at the end of one backward pass (before the optimizer step)."""
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="argen.training.divergence"):
        check.on_pre_optimizer_step(None, TrainerState(), TrainerControl())
    return [r.getMessage() for r in caplog.records]


def test_a_rank_names_the_parameters_whose_own_gradients_are_not_finite(caplog):
    module, check = checked_module()
    module(torch.tensor([[1.0, float("nan"), 2.0]])).sum().backward()
    assert torch.isfinite(module.bias.grad).all() and not torch.isfinite(module.weight.grad).all()
    assert step(check, caplog) == [
        "this rank's own gradients at step 1 are not finite in 1 of 2 parameters (first: weight)"
    ]
    module.zero_grad()
    module(torch.ones(1, 3)).sum().backward()
    assert step(check, caplog) == []  # noted once: the next finite step reports nothing


def test_a_rank_with_finite_own_gradients_blames_their_average(caplog):
    module, check = checked_module()
    module(torch.ones(1, 3)).sum().backward()
    module.bias.grad[0] = float("nan")  # what an average with another rank's NaN leaves
    assert step(check, caplog) == [
        "this rank's own gradients at step 1 are finite; their average over the ranks is not"
    ]
