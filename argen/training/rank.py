"""One rank of a training over several processes: ``python -m argen.training.rank SPEC``, started
by `argen.training.launch.launch` under ``accelerate launch``. It trains with the launcher's spec
through `argen.training.train` (rank 0 writes the output and the logs) and reports a failure to
the launcher as a file in the work folder. Apart from `launch` so that neither imports the other.
"""

import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

import torch.distributed as dist
from transformers import TrainerCallback

from argen.config import Config
from argen.training.distributed import is_main, rank, use_rank_device
from argen.training.launch import ERRORS, ProgressFile, _ranks_lock, _watch_launcher
from argen.training.train import fit_and_write


def main(argv: Sequence[str] | None = None) -> None:
    """One rank: train with the launcher's spec; rank 0 writes the output and the logs."""
    spec = json.loads(Path((argv or sys.argv[1:])[0]).read_text())
    logging.basicConfig(
        level=logging.INFO, format=f"rank {rank()} %(levelname)s %(name)s: %(message)s"
    )
    out_dir = Path(spec["out"])
    work = out_dir.with_name(out_dir.name + ".partial")
    _watch_launcher(spec["launcher"])
    _ranks_lock(work, shared=True)  # held until this process ends
    use_rank_device()
    try:
        config = Config.model_validate(spec["config"])
        callbacks: list[TrainerCallback] = [ProgressFile(work)] if is_main() else []
        fit_and_write(
            config, Path(spec["model"]), [Path(p) for p in spec["splits"]], out_dir, callbacks
        )
    except Exception as exc:
        kind = next((n for n, cls in reversed(ERRORS.items()) if isinstance(exc, cls)), None)
        report = {"rank": rank(), "type": kind or type(exc).__name__, "message": str(exc)}
        (work / f".rank-error-{rank()}.json").write_text(json.dumps(report))
        raise
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


if __name__ == "__main__":
    main()
