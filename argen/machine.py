"""The machine a stage ran on, as its record states it (a report's provenance names the hardware
behind each figure)."""

import os
import platform

import torch


def hardware() -> dict[str, str | int]:
    """The accelerator (each CUDA device's name, or ``cpu``), the CPU count and the platform."""
    if torch.cuda.is_available():
        names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        accelerator = ", ".join(names)
    else:
        accelerator = "cpu"
    return {
        "accelerator": accelerator,
        "cpus": os.cpu_count() or 0,
        "platform": f"{platform.system()} {platform.machine()}, Python {platform.python_version()}",
    }
