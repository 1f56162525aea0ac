"""Helpers for tests that run the whole stack: waiting on the folded log, processes."""

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from allot.bus.tls import CA_ENV
from allot.client import AsyncClient
from allot.client.stack import Stack
from allot.core import JobStatus, State


def status(state: State, job_id: str) -> JobStatus | None:
    job = state.jobs.get(job_id)
    return None if job is None else job.status


def running(state: State, job_id: str) -> bool:
    return status(state, job_id) == JobStatus.RUNNING


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


async def until(client: AsyncClient, check: Callable[[State], bool], timeout: float = 15) -> State:
    """Follow the log until ``check(state)`` holds."""
    async with asyncio.timeout(timeout), contextlib.aclosing(client.states()) as states:
        async for state in states:
            if check(state):
                return state
    raise AssertionError("unreachable")


async def gone(pid: int, timeout: float = 10) -> None:
    """Wait until the process has ended (fail after ``timeout``)."""
    async with asyncio.timeout(timeout):
        while _alive(pid):
            await asyncio.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"


def cli(
    stack: Stack | str, *args: str, identity: Path | None = None
) -> "subprocess.CompletedProcess[str]":
    """Run the ``allot`` command line against ``stack`` (or the NATS URL of one), as its
    operator unless ``identity`` says who else."""
    env = {**os.environ, "ALLOT_NATS_URL": stack if isinstance(stack, str) else stack.url}
    identity = identity or (None if isinstance(stack, str) else stack.operator)
    if identity is not None:
        env["ALLOT_IDENTITY"] = str(identity)
    if not isinstance(stack, str) and stack.tls_ca is not None:
        env[CA_ENV] = str(stack.tls_ca)
    return subprocess.run(
        [sys.executable, "-m", "allot.client.cli", *args],
        env=env,
        stdin=subprocess.DEVNULL,  # no terminal: nothing the command asks can wait on one
        capture_output=True,
        text=True,
        timeout=60,
    )
