"""Planner service objects against a real NATS server."""

import asyncio
import contextlib
import time

from allot.bus import EmbeddedNats, EventLog
from allot.core import JobStatus, State, apply_record
from allot.proto.events import AccountDefined, AccountSettings, MaxWaitExceeded, PlanComputed
from allot.services.planner.app import Planner
from allot.services.runtime import Clock
from tests import builders as b
from tests.aio import background


async def test_two_racing_planners_never_admit_the_same_gpus(
    nats_server: EmbeddedNats, event_log: EventLog
) -> None:
    await event_log.append(b.node("n1", 8))
    await event_log.append(b.node("n2", 8))
    logs = [await EventLog.connect(nats_server.url) for _ in range(2)]
    planners = [Planner(log) for log in logs]
    try:
        async with background(*(p.run() for p in planners)):
            for i in range(40):
                await event_log.append(b.submitted(f"j{i}", gpus=1 + i % 3))
            state = State()
            async with asyncio.timeout(20):
                while True:
                    state = State()
                    for record in await event_log.read():
                        apply_record(state, record)
                    waiting = [state.jobs[j] for j in state.pending]
                    if all(job.reason is not None for job in waiting) and sum(
                        j.status == JobStatus.ADMITTED for j in state.jobs.values()
                    ):
                        break
                    await asyncio.sleep(0.05)
    finally:
        for log in logs:
            await log.close()

    records = await event_log.read()
    plans = [r.event for r in records if isinstance(r.event, PlanComputed)]
    assert sum(p.plans for p in planners) == len(plans)
    assert state.ignored == []  # no admission of GPUs another plan had taken
    admitted = sum(len(p.admissions) for p in plans)
    assert admitted == sum(j.status == JobStatus.ADMITTED for j in state.jobs.values())
    assert sum(len(n.allocated) for n in state.nodes.values()) == 16


class _Clock(Clock):
    """A wall clock that can be moved on: a job 'waits' an hour in no time."""

    def __init__(self) -> None:
        self.ahead = 0

    def now(self) -> int:
        return super().now() + self.ahead


async def test_a_job_past_its_max_wait_is_reported_once_on_a_quiet_log(
    event_log: EventLog,
) -> None:
    settings = AccountSettings(max_wait_ns=3600 * 10**9)
    await event_log.append(AccountDefined(meta=b.meta(), path="lab", settings=settings))
    await event_log.append(
        AccountDefined(meta=b.meta(), path="lab/team", settings=AccountSettings())
    )
    await event_log.append(b.node("n1", 1))
    await event_log.append(b.submitted("big", gpus=1, at=time.time_ns()))
    await event_log.append(b.submitted("waits", gpus=1, at=time.time_ns()))
    clock = _Clock()
    planner = Planner(event_log, clock=clock, tick_s=0.05)
    task = asyncio.create_task(planner.run())
    try:
        async with asyncio.timeout(10):
            while (
                planner.state.jobs.get("waits") is None
                or planner.state.jobs["waits"].reason is None
            ):
                await asyncio.sleep(0.02)
            assert not planner.state.jobs["waits"].max_wait_exceeded
            clock.ahead = 2 * 3600 * 10**9  # nothing is appended: only the tick notices
            while not planner.state.jobs["waits"].max_wait_exceeded:
                await asyncio.sleep(0.02)
            await asyncio.sleep(0.3)  # more ticks: no second report
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    reports = [r.event for r in await event_log.read() if isinstance(r.event, MaxWaitExceeded)]
    assert [(r.job_id, r.account, r.max_wait_ns) for r in reports] == [
        ("waits", "lab", 3600 * 10**9)
    ]
    assert reports[0].waited_ns >= 2 * 3600 * 10**9
