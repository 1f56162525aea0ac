"""Helpers for tests of the NVML layer: whether this machine has a real NVML, and NVML
calls made to fail as the real library fails."""

from collections.abc import Callable

import pynvml


def nvml_loads() -> bool:
    """Whether the real NVML library loads here (a machine with the NVIDIA driver)."""
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return False
    pynvml.nvmlShutdown()
    return True


def failing(code: int) -> Callable[..., None]:
    """An NVML function that answers every call with the error ``code``."""

    def call(*args: object) -> None:
        raise pynvml.NVMLError(code)

    return call
