"""What a job's own code imports to learn where it runs under Allot.

The node agent sets these variables for every job; reading them through this module gives
a clear error when a script is run outside Allot instead of a bare ``KeyError``.
"""

import os
from pathlib import Path


class NotUnderAllot(RuntimeError):
    """The process was not started by an Allot node agent."""


def _variable(name: str) -> str:
    value = os.environ.get(name)
    if value is None:
        raise NotUnderAllot(f"{name} is not set: this process was not started by Allot")
    return value


def job_id() -> str:
    return _variable("ALLOT_JOB_ID")


def attempt() -> int:
    """0 for the first run, one more for each requeue."""
    return int(_variable("ALLOT_ATTEMPT"))


def checkpoint_dir() -> Path:
    """Where checkpoints go; the same directory for every attempt of the job."""
    return Path(_variable("ALLOT_CHECKPOINT_DIR"))


def visible_gpus() -> list[int]:
    """The GPU indices assigned to this job (``CUDA_VISIBLE_DEVICES``)."""
    text = _variable("CUDA_VISIBLE_DEVICES")
    return [int(i) for i in text.split(",") if i]


__all__ = ["NotUnderAllot", "attempt", "checkpoint_dir", "job_id", "visible_gpus"]
