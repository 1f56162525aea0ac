"""What a job's own code imports: where it runs under Allot, and the preemption contract.

The contract, for a job that declares itself resumable:

- When Allot stops the job (preemption, drain), the job's processes get SIGTERM and have
  the job's grace period (``--grace``, 30 s by default) before SIGKILL. Importing this
  module under Allot installs a SIGTERM handler that only sets a flag: the training loop
  polls ``should_stop()``, saves and exits.
- ``save(state)`` writes a checkpoint atomically (a temporary file, fsync, ``os.replace``)
  into ``ALLOT_CHECKPOINT_DIR``, numbered 1, 2, ... across attempts; the node agent sees
  each new file and records ``JobCheckpointed``, so preemption can weigh the work a stop
  would lose. The two latest checkpoints are kept.
- ``resume()`` returns the state of the latest checkpoint, or None on a first start.

The node agent sets the variables read here; reading them through this module gives a clear
error when a script runs outside Allot instead of a bare ``KeyError``. Checkpoints are
pickles written by the job itself: load only your own.
"""

import contextlib
import os
import pickle
import re
import signal
import threading
from pathlib import Path
from typing import Any

KEEP = 2  # checkpoints kept; older ones are removed once a newer one is safely written
_CHECKPOINT = re.compile(r"^checkpoint-(\d{8})\.pkl$")
_stop_requested = threading.Event()


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


def array_index() -> int:
    """This task's index in its job array (``allot submit --array``)."""
    return int(_variable("ALLOT_ARRAY_INDEX"))


def checkpoint_dir() -> Path:
    """Where checkpoints go; the same directory for every attempt of the job."""
    return Path(_variable("ALLOT_CHECKPOINT_DIR"))


def visible_gpus() -> list[int]:
    """The node's indices of the GPUs assigned to this job. (``CUDA_VISIBLE_DEVICES`` names
    the same devices, by UUID on a real host; ``gpu_uuids()`` has those.)"""
    text = _variable("ALLOT_GPU_INDICES")
    return [int(i) for i in text.split(",") if i]


def gpu_uuids() -> list[str]:
    """The UUIDs of the devices assigned to this job (GPU-… or MIG-…); empty where the node
    does not know them (a simulated node)."""
    return [u for u in _variable("ALLOT_GPU_UUIDS").split(",") if u]


def should_stop() -> bool:
    """Whether Allot asked the job to stop (SIGTERM): save a checkpoint and exit."""
    return _stop_requested.is_set()


def install_stop_handler() -> None:
    """Turn SIGTERM into ``should_stop()``. Done on import under Allot; call it yourself
    if this module is imported before the variables are set."""
    signal.signal(signal.SIGTERM, lambda signum, frame: _stop_requested.set())


def checkpoints(directory: Path) -> list[tuple[int, Path]]:
    """The checkpoints in a directory, oldest first: (step, path)."""
    found = []
    with contextlib.suppress(FileNotFoundError):
        for path in directory.iterdir():
            match = _CHECKPOINT.match(path.name)
            if match:
                found.append((int(match.group(1)), path))
    return sorted(found)


def save(state: Any) -> Path:
    """Write ``state`` as the job's next checkpoint, atomically; return its path."""
    directory = checkpoint_dir()
    directory.mkdir(parents=True, exist_ok=True)
    existing = checkpoints(directory)
    step = existing[-1][0] + 1 if existing else 1
    path = directory / f"checkpoint-{step:08d}.pkl"
    temporary = directory / f".{path.name}.{os.getpid()}.tmp"
    with open(temporary, "wb") as file:
        pickle.dump(state, file, protocol=pickle.HIGHEST_PROTOCOL)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)  # the rename itself survives a crash
    finally:
        os.close(descriptor)
    for _, old in existing[: max(0, len(existing) + 1 - KEEP)]:
        old.unlink(missing_ok=True)
    return path


def resume() -> Any | None:
    """The state saved by the latest checkpoint, or None if there is none."""
    found = checkpoints(checkpoint_dir())
    if not found:
        return None
    with open(found[-1][1], "rb") as file:
        return pickle.load(file)


if "ALLOT_JOB_ID" in os.environ and threading.current_thread() is threading.main_thread():
    install_stop_handler()

__all__ = [
    "NotUnderAllot",
    "attempt",
    "checkpoint_dir",
    "checkpoints",
    "gpu_uuids",
    "install_stop_handler",
    "job_id",
    "resume",
    "save",
    "should_stop",
    "visible_gpus",
]
