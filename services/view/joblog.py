"""One job's part of the log, read for its trace: the job's own events and the plans that
decided about it, and nothing else, so a trace costs what the job holds, not the log.

The read model knows which plans those are (the job's trail names them); the job's events
are those under its own subjects (``allot.evt.job.<id>.>``, ``allot.proto.subjects``), and
its submission, where that was appended together with others, the batch at its sequence.
"""

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any, Protocol

import msgspec

from allot.bus.eventlog import Record
from allot.bus.log import Log
from allot.client.jobtrace import job_trace
from allot.core import JobRecord
from allot.proto.subjects import EVENTS_PREFIX, PLAN_EVENTS, SUBMITTED_TOGETHER

MAX_PLANS = 64  # of the plans that decided about a job, the latest; each is one read
READ_S = 5.0  # a trace not read by then is not shown (the page says so and tries again)


class JobRecords(Protocol):
    async def __call__(self, job: JobRecord, plan_seqs: Sequence[int]) -> list[Record]:
        """The job's records and those of the plans ``plan_seqs``, in the log's order."""
        ...


class JobLog:
    """A job's records, read from the log by subject."""

    def __init__(self, events: Log):
        self.events = events

    async def __call__(self, job: JobRecord, plan_seqs: Sequence[int]) -> list[Record]:
        async with asyncio.timeout(READ_S):
            own = await self._all_under(f"{EVENTS_PREFIX}.job.{job.job_id}.>", job.submitted_seq)
            if job.array_id is not None:  # a task: its array's submission, a cancel of all
                subject = f"{EVENTS_PREFIX}.job.{job.array_id}.>"
                own += await self._all_under(subject, job.submitted_seq)
            if all(record.seq != job.submitted_seq for record in own):  # submitted together
                together = await self._one(job.submitted_seq, SUBMITTED_TOGETHER)
                own += [together] if together is not None else []
            plans = [await self._one(seq, PLAN_EVENTS) for seq in plan_seqs[-MAX_PLANS:]]
        return sorted([*own, *(plan for plan in plans if plan is not None)], key=_seq)

    async def _all_under(self, subject: str, from_seq: int) -> list[Record]:
        """Every record under ``subject`` from ``from_seq`` to the last one there now."""
        records = []
        async with contextlib.aclosing(self.events.follow(from_seq, subject)) as found:
            async for record in found:
                records.append(record)
                if record.backlog == 0:  # the last of them when it was sent
                    break
        return records

    async def _one(self, seq: int, subject: str) -> Record | None:
        """The record at ``seq``, if it is under ``subject``."""
        async with contextlib.aclosing(self.events.follow(seq, subject)) as found:
            async for record in found:
                return record if record.seq == seq else None
        return None


def _seq(record: Record) -> int:
    return record.seq


def trace_view(job: JobRecord, records: Sequence[Record], now: int) -> dict[str, Any]:
    """The job's trace (``allot.client.jobtrace``) from its own records. Folded alone,
    they cannot say where the job stands (its admission needs the nodes, its end the
    whole fold): the read model's record of the job says it instead."""
    trace = job_trace(job.job_id, records)
    trace.status, trace.ended = str(job.status), job.status.terminal
    for span in trace.spans:
        if span.end is None and job.ended_at is not None:
            span.end = job.ended_at
    if not trace.ended:
        trace.now = max(trace.now, now)  # a span still going on goes on until now
    view: dict[str, Any] = msgspec.to_builtins(trace)
    return view
