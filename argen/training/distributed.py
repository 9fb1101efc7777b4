"""Rank helpers for GRPO spread over several processes of one machine (one per GPU).

A rank started by `argen.training.launch` knows its place from the variables torchrun sets
(``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``). Outside such a launch every helper answers as the single
process it is, so training in one process runs exactly as it did before.
"""

import logging
import os

import torch
from transformers import TrainerCallback

from argen.config import TrainConfig
from argen.errors import ArgenError
from argen.training.validation import ValidationCallback

log = logging.getLogger(__name__)


def world_size() -> int:
    """How many processes train together (1 outside a launch)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def rank() -> int:
    """This process's place among them (0 outside a launch)."""
    return int(os.environ.get("RANK", "0"))


def is_main() -> bool:
    """Rank 0 alone writes the output, the logs, the validation scores and wandb's run."""
    return rank() == 0


def process_count(train: TrainConfig) -> int:
    """The processes `train.num_processes` asks for on this machine: 'auto' is one per visible
    CUDA device (1 on a CPU); more than the visible GPUs is an error."""
    if world_size() > 1:
        raise ArgenError(
            "argen's training was started under a distributed launcher; start it as one process "
            "and set train.num_processes instead (argen launches the ranks itself)"
        )
    visible = torch.cuda.device_count() if torch.cuda.is_available() else 0
    wanted = train.num_processes
    if wanted == "auto":
        return max(visible, 1)
    if visible and wanted > visible:
        raise ArgenError(
            f"train.num_processes = {wanted} but this machine shows {visible} CUDA device(s) "
            "(CUDA_VISIBLE_DEVICES); use at most that many, or 'auto'"
        )
    return wanted


def one_gpu_per_process(args):
    """TRL arguments that train one process on one GPU. Outside a distributed launch, where
    several GPUs are visible, transformers wraps the model in DataParallel over all of them and
    TRL loads it with ``device_map="auto"``, which spreads its layers over all of them too; TRL's
    GRPO runs neither (on a two-GPU H100 host: tensors on cuda:0 and cuda:1). Loaded without a
    device map, the trainer moves the whole policy to the first GPU. Several GPUs are used
    through ``train.num_processes`` instead."""
    if args.n_gpu > 1:
        args._n_gpu = 1
        args.model_init_kwargs = {**(args.model_init_kwargs or {}), "device_map": None}
    return args


def use_rank_device() -> None:
    """Pin this rank to its own GPU before anything touches CUDA: the fast engine makes its
    streams and CUDA graphs on the current device."""
    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))


def sum_over_ranks(values: list[int]) -> list[int]:
    """Each value summed over all ranks; every rank must call it at the same point."""
    from accelerate import PartialState
    from accelerate.utils import reduce

    local = torch.tensor(values, dtype=torch.long, device=PartialState().device)
    return reduce(local, reduction="sum").tolist()


class RankTotals(TrainerCallback):
    """The reward judgements of all ranks. Each rank judges its own completions; the run's
    counts (saved in checkpoints by rank 0, written to its manifest) are their sum, taken at
    every step's end (before a checkpoint is saved). One process reads its own counts."""

    def __init__(self, rewards):
        self.rewards = rewards
        self.summed = [0, 0]

    def on_step_end(self, args, state, control, **kwargs):
        if world_size() > 1:
            self.summed = sum_over_ranks([self.rewards.judged, self.rewards.failures])

    @property
    def judged(self) -> int:
        return self.summed[0] if world_size() > 1 else self.rewards.judged

    @property
    def failures(self) -> int:
        return self.summed[1] if world_size() > 1 else self.rewards.failures


class RankValidation(ValidationCallback):
    """Validation on rank 0 alone (one score per step, one best adapter, written once) while
    the other ranks wait for it. In one process it is `ValidationCallback`."""

    def validate(self, model, step: int) -> dict | None:
        if world_size() == 1:
            return super().validate(model, step)
        record = super().validate(model, step) if is_main() else None
        # Rank 0's record goes through trainer.log, after which the trainer skips that step's own
        # log and the all-gathers in it: the other ranks must skip it too. The all-reduce that
        # tells them is also where they wait for rank 0's validation to end.
        assert self.trainer is not None  # set as soon as the trainer is built, before training
        control = self.trainer.control
        control.should_log = bool(sum_over_ranks([int(is_main() and control.should_log)])[0])
        return record
