"""Planner service objects against a real NATS server."""

import asyncio
import contextlib
import sys
import time
from pathlib import Path

import msgspec
import pytest

from allot.bus import EmbeddedNats, EventLog
from allot.core import JobStatus, Policy, State, apply_record, policy_hash
from allot.core.policies import POLICIES
from allot.core.policytoml import read_policy
from allot.proto.events import (
    AccountDefined,
    AccountSettings,
    MaxWaitExceeded,
    PlanComputed,
    PolicyAdopted,
)
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


async def _stated(planner: Planner, job_ids: list[str]) -> None:
    """Until the planner has folded a plan stating why each of ``job_ids`` waits."""
    while not all(
        (job := planner.state.jobs.get(j)) is not None and job.reason is not None for j in job_ids
    ):
        await asyncio.sleep(0.01)


async def test_a_burst_is_planned_once_an_interval_and_a_quiet_log_at_once(
    event_log: EventLog,
) -> None:
    await event_log.append(b.node("n1", 1))
    await event_log.append(b.submitted("holds", gpus=1))
    interval = 0.5
    planner = Planner(event_log, tick_s=60.0, min_interval_s=interval)  # no tick to help
    loop = asyncio.get_running_loop()
    async with background(planner.run()), asyncio.timeout(30):
        while planner.plans == 0:
            await asyncio.sleep(0.01)
        began = loop.time()
        burst = [f"b{i}" for i in range(40)]
        for job_id in burst:  # each appended alone, a catch-up and a plan due each time
            await event_log.append(b.submitted(job_id, gpus=1))
            await asyncio.sleep(0.01)
        ended = loop.time()
        await _stated(planner, burst)
        stated_after = loop.time() - ended
        plans_in_burst = planner.plans - 1
        await asyncio.sleep(interval)  # quiet for an interval: the next is planned at once
        appended = loop.time()
        await event_log.append(b.submitted("alone", gpus=1))
        await _stated(planner, ["alone"])
        alone_after = loop.time() - appended
    assert plans_in_burst <= (ended - began) / interval + 2
    assert stated_after < interval + 1.0  # the burst's end waited out one interval, no tick
    assert alone_after < interval


class _SetBack(Clock):
    """A monotonic clock that can be set back (by a bug: a real one never is)."""

    def __init__(self) -> None:
        self.back = 0.0

    def monotonic(self) -> float:
        return super().monotonic() - self.back


async def test_a_clock_set_back_holds_a_plan_back_one_interval_at_most(
    event_log: EventLog,
) -> None:
    await event_log.append(b.node("n1", 1))
    await event_log.append(b.submitted("holds", gpus=1))
    clock = _SetBack()
    planner = Planner(event_log, clock=clock, tick_s=60.0, min_interval_s=0.2)
    loop = asyncio.get_running_loop()
    async with background(planner.run()), asyncio.timeout(30):
        while planner.plans == 0:
            await asyncio.sleep(0.01)
        clock.back = 3600.0  # the last plan now seems an hour ahead
        appended = loop.time()
        await event_log.append(b.submitted("next", gpus=1))
        await _stated(planner, ["next"])
    assert loop.time() - appended < 2.0


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


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "policy.toml"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--policy", "slurm"], POLICIES["slurm"]),
        # A file, and a flag that wins over it.
        (
            ["--policy", str(EXAMPLE), "--order", "fifo"],
            msgspec.structs.replace(read_policy(EXAMPLE.read_text()), order="fifo"),
        ),
    ],
    ids=["name", "file-and-flag"],
)
async def test_the_planner_service_adopts_and_plans_by_the_policy_it_is_given(
    nats_server: EmbeddedNats, event_log: EventLog, argv: list[str], expected: Policy
) -> None:
    await event_log.append(b.node("n1", 1))
    await event_log.append(b.submitted("j1", gpus=1))
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "allot.services.planner", "--nats-url", nats_server.url, *argv
    )
    try:
        async with asyncio.timeout(30):
            while not any(isinstance(r.event, PlanComputed) for r in await event_log.read()):
                await asyncio.sleep(0.1)
    finally:
        process.terminate()
        await process.wait()
    events = [r.event for r in await event_log.read()]
    [adopted] = [e for e in events if isinstance(e, PolicyAdopted)]
    hashed = policy_hash(expected)
    assert (adopted.name, adopted.policy_hash) == (expected.name, hashed)
    assert adopted.policy_json == msgspec.json.encode(expected).decode()
    plans = [(e.policy, e.policy_hash) for e in events if isinstance(e, PlanComputed)]
    assert set(plans) == {(expected.name, hashed)}  # one plan at least


async def test_a_bad_policy_file_stops_the_planner_with_the_field_named(tmp_path: Path) -> None:
    (tmp_path / "mine.toml").write_text('name = "mine"\nqueue_depth = 0\n')
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "allot.services.planner", "--nats-url", "nats://127.0.0.1:1",
        "--policy", str(tmp_path / "mine.toml"), stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 2
    said = err.decode()
    assert "Traceback" not in said
    assert said.splitlines()[-1] == (
        f"allot-planner: error: argument --policy: {tmp_path / 'mine.toml'}: "
        "queue_depth='0': a whole number from 1 to 1000000"
    )
