"""Planner service objects against a real NATS server."""

import asyncio
import contextlib

from allot.bus import EmbeddedNats, EventLog
from allot.core import JobStatus, State, apply_record
from allot.proto.events import PlanComputed
from allot.services.planner.app import Planner
from tests import builders as b


async def test_two_racing_planners_never_admit_the_same_gpus(
    nats_server: EmbeddedNats, event_log: EventLog
) -> None:
    await event_log.append(b.node("n1", 8))
    await event_log.append(b.node("n2", 8))
    logs = [await EventLog.connect(nats_server.url) for _ in range(2)]
    planners = [Planner(log) for log in logs]
    running = [asyncio.create_task(p.run()) for p in planners]
    try:
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
        for task in running:
            task.cancel()
        for task in running:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for log in logs:
            await log.close()

    records = await event_log.read()
    plans = [r.event for r in records if isinstance(r.event, PlanComputed)]
    assert sum(p.plans for p in planners) == len(plans)
    assert state.ignored == []  # no admission of GPUs another plan had taken
    admitted = sum(len(p.admissions) for p in plans)
    assert admitted == sum(j.status == JobStatus.ADMITTED for j in state.jobs.values())
    assert sum(len(n.allocated) for n in state.nodes.values()) == 16
