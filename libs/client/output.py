"""Showing a job's output, as ``allot logs`` and ``allot submit --wait`` do: the output of
each of its processes read from the agent of its node, a piece at a time, from wherever
the command line runs (``AsyncClient.output``).

One process's output is written as it is, byte for byte. Several processes' outputs (a
gang's, with ``--all-ranks``) are written line by line, each line after the ranks of the
workers that process runs: ``[0] …``, ``[2-3] …``.
"""

import asyncio
import contextlib
from collections.abc import Callable

from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout

from allot.client.client import AsyncClient
from allot.core import JobRecord
from allot.core.ranks import Process, process_of_worker, processes
from allot.proto.output import MAX_OUTPUT_BYTES

POLL_S = 0.5  # between asks while a followed process prints nothing


class NoOutput(Exception):
    """Why there is no output to show, in one line."""


async def logs(
    client: AsyncClient,
    job_id: str,
    rank: int | None,
    write: Callable[[bytes], None],
    *,
    follow: bool = False,
    poll_s: float = POLL_S,
) -> None:
    """Write the output of worker ``rank`` of ``job_id`` (None: of every worker), as
    ``allot logs`` does; with ``follow``, wait for it to start, then write its output as
    it comes until it ends. Raises ``NoOutput`` where there is none to show, and what
    ``AsyncClient.output`` raises where an agent refuses."""
    job = await client.job(job_id)
    if job is None:
        raise NoOutput(f"no job {job_id}")
    if rank is not None and not 0 <= rank < job.spec.workers:
        raise NoOutput(f"{job_id} has no worker {rank}: its workers are 0 to "
                       f"{job.spec.workers - 1}")  # fmt: skip
    if follow and not _started(job, rank):
        job = await _until_started(client, job_id, rank, job.attempts)
    while True:
        await show(client, job, _to_read(job, rank), write, follow=follow, poll_s=poll_s)
        if not follow:
            return
        # Its processes have ended: the job has too, or it is requeued (preempted, its
        # node lost) and goes on in a later attempt, followed as well.
        ended_attempt = job.attempts
        job = await _until_started(client, job_id, rank, ended_attempt + 1)
        if job.attempts == ended_attempt or not _started(job, rank):
            return


def _chosen(job: JobRecord, rank: int | None) -> list[Process]:
    if rank is None:
        return processes(job)
    process = process_of_worker(job, rank)
    return [] if process is None else [process]


def _started(job: JobRecord, rank: int | None) -> bool:
    chosen = _chosen(job, rank)
    return bool(chosen) and all(p.node_id in job.started_on for p in chosen)


async def _until_started(
    client: AsyncClient, job_id: str, rank: int | None, attempt: int
) -> JobRecord:
    """The job once the processes asked for have started in ``attempt`` or a later one,
    or once it has ended."""
    async with contextlib.aclosing(client.job_updates(job_id)) as updates:
        async for job in updates:
            if job is None:
                continue
            if job.status.terminal or (job.attempts >= attempt and _started(job, rank)):
                return job
    raise AssertionError("unreachable")


def _to_read(job: JobRecord, rank: int | None) -> list[Process]:
    """The processes asked for that have started; NoOutput where none has."""
    started = [p for p in _chosen(job, rank) if p.node_id in job.started_on]
    if started:
        return started
    one = rank is None or job.spec.workers == 1
    what = job.job_id if one else f"worker {rank} of {job.job_id}"
    if job.status.terminal:
        raise NoOutput(f"{what} never started: the job {job.status} ({job.end_reason})")
    attempt = f", in attempt {job.attempts}" if job.attempts else ""
    raise NoOutput(f"{what} has not started: the job is {job.status}{attempt}")


class Reading:
    """One process's output being read: how far, and a line begun but not yet ended."""

    def __init__(self, process: Process, prefixed: bool):
        self.process = process
        self.prefix = f"[{process.ranks}] ".encode() if prefixed else b""
        self.offset = 0
        self.partial = b""
        self.done = False
        self.size: int | None = None  # not following: as much as there was at first

    def lines(self, data: bytes) -> bytes:
        """What to write of ``data``: itself, or its complete lines each after the prefix."""
        if not self.prefix:
            return data
        *complete, self.partial = (self.partial + data).split(b"\n")
        return b"".join(self.prefix + line + b"\n" for line in complete)

    def rest(self) -> bytes:
        """The last line, where it did not end with a line break."""
        rest, self.partial = self.partial, b""
        return self.prefix + rest + b"\n" if rest else b""


async def show(
    client: AsyncClient,
    job: JobRecord,
    processes: list[Process],
    write: Callable[[bytes], None],
    *,
    follow: bool = False,
    poll_s: float = POLL_S,
) -> None:
    """Write the output of ``processes`` of ``job``'s current attempt: what there is now,
    or with ``follow`` all of it, until each process has ended. Raises what
    ``AsyncClient.output`` raises."""
    readings = [Reading(process, prefixed=len(processes) > 1) for process in processes]
    if not follow:  # one after the other: each process's output in one piece
        for reading in readings:
            while not reading.done:
                await _read(client, job, reading, follow, write)
        return
    while not all(reading.done for reading in readings):
        got = [await _read(client, job, r, follow, write) for r in readings if not r.done]
        if not any(got):
            await asyncio.sleep(poll_s)


async def _read(
    client: AsyncClient,
    job: JobRecord,
    reading: Reading,
    follow: bool,
    write: Callable[[bytes], None],
) -> bool:
    """Ask for the next piece and write it; whether there was one."""
    node_id = reading.process.node_id
    try:
        reply = await client.output(
            job.job_id,
            node_id=node_id,
            attempt=job.attempts,
            offset=reading.offset,
            max_bytes=MAX_OUTPUT_BYTES,
        )
    except (NoRespondersError, NatsTimeout):
        raise NoOutput(
            f"the agent of {node_id}, where worker {reading.process.ranks} of {job.job_id} "
            "ran, does not answer: its output is on that host"
        ) from None
    reading.offset = reply.next_offset
    if follow:
        reading.done = reply.ended and reply.next_offset >= reply.size
    else:  # what there is now, not what a fast printer adds while it is read
        reading.size = reply.size if reading.size is None else reading.size
        reading.done = reply.next_offset >= reading.size
    write(reading.lines(reply.data) + (reading.rest() if reading.done else b""))
    return bool(reply.data)
