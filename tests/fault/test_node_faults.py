"""Failures of node agents and services, with the whole stack running as processes."""

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

import msgspec
import pytest

from allot.client import AsyncClient
from allot.client.stack import NodeShape, Stack
from allot.core import JobStatus
from allot.proto.events import JobSpec
from allot.services.node import process
from tests import builders as b
from tests.stack import gone, python, running, status, until


async def test_a_killed_node_agent_ends_in_node_lost_and_its_job_is_not_left_running(
    stack: Stack, client: AsyncClient
) -> None:
    spec = JobSpec(account="lab/a", gpus=4, command=python("import time; time.sleep(60)"))
    reply = await client.submit(spec)
    assert reply.job_id is not None
    job_id = reply.job_id
    state = await until(client, lambda s: running(s, job_id))
    [node_id] = state.jobs[job_id].placements
    assert node_id == "node-1"

    stack.kill(node_id)
    state = await until(client, lambda s: node_id in s.nodes and s.nodes[node_id].lost, timeout=20)
    job = state.jobs[job_id]
    assert job.status == JobStatus.LOST
    assert state.nodes[node_id].allocated == {}
    assert "node-1 lost" in job.end_reason

    # The agent comes back: the node is usable again and the orphaned process is killed.
    pid = job.started_on[node_id]
    await stack.revive(node_id)
    await until(
        client, lambda s: s.seq > state.seq and node_id in s.nodes and not s.nodes[node_id].lost
    )
    await gone(pid)


async def test_a_restarted_agent_adopts_its_running_job_and_reports_its_exit(
    stack: Stack, client: AsyncClient, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    code = (
        f"import os, time\nwhile not os.path.exists({str(go)!r}): time.sleep(0.05)\n"
        "raise SystemExit(7)"
    )
    reply = await client.submit(JobSpec(account="lab/a", gpus=4, command=python(code)))
    assert reply.job_id is not None
    job_id = reply.job_id
    await until(client, lambda s: running(s, job_id))

    stack.kill("node-1")
    await stack.revive("node-1")  # faster than the node timeout: no NodeLost
    go.touch()
    job = await client.wait(job_id, timeout=20)
    assert job.status == JobStatus.FAILED
    assert job.exit_code == 7
    events = [r.type for r in await client.events.read() if job_id in r.subject]
    assert events.count("JobStarted") == 1
    assert events.count("JobExited") == 1


async def test_a_node_declared_lost_while_alive_kills_its_jobs_and_registers_again(
    stack: Stack, client: AsyncClient
) -> None:
    reply = await client.submit(
        JobSpec(account="lab/a", gpus=2, command=python("import time; time.sleep(60)"))
    )
    assert reply.job_id is not None
    job_id = reply.job_id
    state = await until(client, lambda s: running(s, job_id))
    [(node_id, pid)] = state.jobs[job_id].started_on.items()

    # As if telemetry had missed its heartbeats.
    await client.events.append(b.lost(node_id))
    state = await until(client, lambda s: status(s, job_id) == JobStatus.LOST)
    lost_at = state.seq
    await until(client, lambda s: s.seq > lost_at and not s.nodes[node_id].lost)
    await gone(pid)


async def test_allot_up_restarts_a_service_that_dies(tmp_path: Path) -> None:
    s = Stack(tmp_path / "allot", [NodeShape(node_id="node-1", gpus=1)], restart=True)
    async with s, await s.client() as client:
        planner = s.children["planner"].process
        assert planner is not None
        planner.kill()
        await planner.wait()
        reply = await client.submit(JobSpec(account="lab/a", gpus=1, command=python("pass")))
        assert reply.job_id is not None
        job = await client.wait(reply.job_id, timeout=20)
        assert job.status == JobStatus.SUCCEEDED
        assert s.children["planner"].process is not planner


async def test_a_job_cancelled_before_its_agent_started_it_never_runs(tmp_path: Path) -> None:
    nodes = [NodeShape(node_id="node-1", gpus=2)]
    async with (
        Stack(tmp_path / "allot", nodes, node_timeout_s=60, restart=False) as s,
        await s.client() as client,
    ):
        s.kill("node-1")  # admitted while its agent is down: nobody starts it
        marker = tmp_path / "ran"
        code = f"open({str(marker)!r}, 'w').write('ran')"
        reply = await client.submit(JobSpec(account="lab/a", gpus=2, command=python(code)))
        assert reply.job_id is not None
        job_id = reply.job_id
        await until(client, lambda st: status(st, job_id) == JobStatus.ADMITTED)
        await client.cancel(job_id)
        await s.revive("node-1")
        job = await client.wait(job_id, timeout=20)
        assert job.status == JobStatus.CANCELLED
        assert job.started_at is None
        assert not marker.exists()
        assert "JobCancelled" in [r.type for r in await client.events.read() if job_id in r.subject]


class AgentKilled(Exception):
    """Stands for a kill -9 of the node agent at that point of its work."""


async def test_an_agent_killed_just_after_starting_a_job_leaves_its_pid_for_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The chaos run found it: an agent killed between starting a job's process and noting
    # its pid left a job that ran to its end while the next agent reported that it never
    # started (the job failed, its GPUs were given to another job under the live process).
    spawn = asyncio.create_subprocess_exec

    async def spawn_then_die(*args: Any, **kwargs: Any) -> asyncio.subprocess.Process:
        await spawn(*args, **kwargs)
        raise AgentKilled

    job = b.fold(b.node("node-1", 1), b.submitted("j1"), b.plan(("j1", "node-1", [0]))).jobs["j1"]
    job.spec = msgspec.structs.replace(job.spec, command=python("import time; time.sleep(30)"))
    job_dir = process.JobDir(tmp_path / "work", "j1", 0, tmp_path / "checkpoints")
    monkeypatch.setattr(asyncio, "create_subprocess_exec", spawn_then_die)
    with pytest.raises(AgentKilled):
        await process.launch(job, job_dir, {})
    monkeypatch.undo()

    pid = job_dir.pid()
    try:
        assert pid is not None, "the next agent finds no trace of the running job"
        assert process.alive(pid)
    finally:
        for supervisor in [pid] if pid is not None else []:
            os.killpg(supervisor, signal.SIGKILL)


async def test_a_stop_sent_while_the_job_starts_reaches_the_job(tmp_path: Path) -> None:
    # A cancel right after the start: SIGTERM reached the supervisor while it was forking
    # the job, the job's copy of the supervisor's handler swallowed it before exec, and the
    # job ran on until SIGKILL (exit status lost). Each start is signalled a little later.
    job = b.fold(b.node("node-1", 1), b.submitted("j1"), b.plan(("j1", "node-1", [0]))).jobs["j1"]
    job.spec = msgspec.structs.replace(job.spec, command=python("import time; time.sleep(30)"))
    codes = []
    for attempt in range(24):
        job_dir = process.JobDir(tmp_path / "work", "j1", attempt, tmp_path / "checkpoints")
        handle = await process.launch(job, job_dir, {})
        await asyncio.sleep(attempt * 0.002)
        process.signal_group(handle.pid, signal.SIGTERM)
        try:
            codes.append(await asyncio.wait_for(process.wait_exit(handle.pid, job_dir, handle), 5))
        except TimeoutError:
            process.signal_group(handle.pid, signal.SIGKILL)
            codes.append(None)
    assert codes == [-signal.SIGTERM] * 24
