"""Job processes on this host: start, find again after a restart, signal, await the end.

A job of attempt N lives in ``WORK/jobs/<job id>/<N>/``: ``launching`` (written before the
start), ``pid`` (written atomically by the new process itself, before it runs anything),
``output.log`` (stdout and stderr) and ``exit_code`` (written by the supervisor). A
directory with ``launching`` but no ``pid`` is an attempt whose agent died while starting
it, before any process of it existed: had the agent noted the pid after the start, a kill
between the two would leave a job running that no agent knows of.
"""

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from allot.core import JobRecord
from allot.core.arrays import indices
from allot.core.model import ArrayRecord
from allot.core.ranks import local_workers
from allot.services.node import supervise
from allot.services.node.supervise import write_atomically


class JobDir:
    def __init__(self, work_dir: Path, job_id: str, attempt: int, checkpoint_root: Path):
        self.attempt = attempt
        self.path = work_dir / "jobs" / job_id / str(attempt)
        self.checkpoints = checkpoint_root / job_id  # every attempt, on whichever node

    @property
    def output(self) -> Path:
        return self.path / "output.log"

    @property
    def launching(self) -> bool:
        return (self.path / "launching").exists()

    def pid(self) -> int | None:
        try:
            return int((self.path / "pid").read_text())
        except (FileNotFoundError, ValueError):
            return None

    def exit_code(self) -> int | None:
        try:
            return int((self.path / "exit_code").read_text())
        except (FileNotFoundError, ValueError):
            return None


def gang_env(job: JobRecord, node_id: str, lead_host: str) -> dict[str, str]:
    """What a job's process on ``node_id`` learns of its gang. One process runs per node
    with all the job's GPUs there; it starts ``ALLOT_LOCAL_WORKERS`` workers (as torchrun's
    ``--nproc-per-node`` would), ranked from ``ALLOT_NODE_RANK``, meeting at the lead host."""
    gpus = job.placements[node_id]
    return {
        "ALLOT_JOB_ID": job.job_id,
        "ALLOT_NODE_ID": node_id,
        "ALLOT_ATTEMPT": str(job.attempts),
        "ALLOT_NODE_RANK": str(list(job.placements).index(node_id)),
        "ALLOT_NUM_NODES": str(len(job.placements)),
        "ALLOT_LEAD_HOST": lead_host,
        "ALLOT_WORKERS": str(job.spec.workers),
        "ALLOT_GPUS_PER_WORKER": str(job.spec.gpus),
        "ALLOT_LOCAL_WORKERS": str(local_workers(job.spec, len(gpus))),
    }


def array_env(job: JobRecord, array: ArrayRecord | None) -> dict[str, str]:
    """What a task of a job array learns of it: its index, and the array's id, size and
    first and last index, as Slurm's ``SLURM_ARRAY_*`` tell them. Not under Slurm's names:
    those tell libraries that look for them (PyTorch Lightning, submitit) that Slurm runs
    the job."""
    if array is None:
        return {}
    numbers = indices(array.array)
    return {
        "ALLOT_ARRAY_JOB_ID": array.array_id,
        "ALLOT_ARRAY_INDEX": str(job.array_index),
        "ALLOT_ARRAY_TASK_COUNT": str(len(numbers)),
        "ALLOT_ARRAY_TASK_MIN": str(numbers[0]),
        "ALLOT_ARRAY_TASK_MAX": str(numbers[-1]),
    }


def device_env(gpus: list[int], uuids: list[str]) -> dict[str, str]:
    """Which devices the job's process sees: by UUID where given (as CUDA_VISIBLE_DEVICES
    takes them, MIG instances included), else by index."""
    indices = ",".join(str(g) for g in gpus)
    return {
        "CUDA_VISIBLE_DEVICES": ",".join(uuids) if uuids else indices,
        "ALLOT_GPU_INDICES": indices,
        "ALLOT_GPU_UUIDS": ",".join(uuids),
    }


async def launch(
    job: JobRecord, job_dir: JobDir, gang: dict[str, str]
) -> asyncio.subprocess.Process:
    """Start the job's supervisor as the leader of a new process group."""
    job_dir.path.mkdir(parents=True, exist_ok=True)
    job_dir.checkpoints.mkdir(parents=True, exist_ok=True)
    (job_dir.path / "launching").touch()
    env = {
        **os.environ,
        **job.spec.env,
        **gang,
        "ALLOT_CHECKPOINT_DIR": str(job_dir.checkpoints),
    }
    with open(job_dir.output, "ab") as output:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-I",  # isolated, without site: it starts in half the time (its docstring)
            "-S",
            supervise.__file__,
            str(job_dir.path),
            "--",
            *job.spec.command,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=output,
            stderr=output,
            cwd=job.spec.workdir or job_dir.path,
            env=env,
            start_new_session=True,
            preexec_fn=_before_exec(job_dir.path / "pid"),
        )
    return process


def _before_exec(pid_file: Path) -> Callable[[], None]:
    """What the new process does before it runs the supervisor: note its pid (the
    supervisor keeps it), then block stop signals (kept pending until the supervisor is
    ready to pass them on: a stop that arrives while it is still starting is neither lost
    nor fatal to it). A failure here stops the start: nothing runs without its pid."""

    def prepare() -> None:
        write_atomically(pid_file, str(os.getpid()))
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})

    return prepare


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie has exited: it only waits to be reaped.
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    return True


def signal_group(pid: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signum)


async def wait_exit(
    pid: int, job_dir: JobDir, process: asyncio.subprocess.Process | None, poll_s: float = 0.1
) -> int | None:
    """Wait until the supervisor is gone; its exit code, or None if it left none.
    A supervisor started by an earlier agent is not our child: it is polled."""
    if process is not None:
        await process.wait()
    while alive(pid):
        await asyncio.sleep(poll_s)
    # The supervisor writes the file before it exits; a killed one writes nothing.
    return job_dir.exit_code()
