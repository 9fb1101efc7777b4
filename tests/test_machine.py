"""The hardware a stage records: the accelerator, the CPU count and the platform."""

import platform

from argen.machine import hardware


def test_the_hardware_names_the_accelerator_cpus_and_platform():
    record = hardware()
    assert record["accelerator"]  # "cpu" here, each CUDA device's name on a GPU
    assert record["cpus"] >= 1
    assert platform.python_version() in record["platform"]
