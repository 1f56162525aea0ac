"""The whole stack as separate processes over a real NATS server, driven like a user would."""

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from allot.client import AsyncClient
from allot.client.stack import NodeShape, Stack
from allot.core import POLICY_FIRST_FIT, JobStatus, State, apply_record, plan, policy_hash
from allot.proto.events import JobSpec, PlanComputed
from tests import builders as b


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[Stack]:
    nodes = [NodeShape(node_id="node-1", gpus=4), NodeShape(node_id="node-2", gpus=2)]
    s = Stack(
        tmp_path / "allot",
        nodes,
        node_timeout_s=1.5,
        heartbeat_s=0.2,
        stop_grace_s=2,
        restart=False,
    )
    await s.start()
    yield s
    await s.stop()


@pytest.fixture
async def client(stack: Stack) -> AsyncIterator[AsyncClient]:
    async with await AsyncClient.connect(stack.url) as c:
        yield c


def status(state: State, job_id: str) -> JobStatus | None:
    job = state.jobs.get(job_id)
    return None if job is None else job.status


def running(state: State, job_id: str) -> bool:
    return status(state, job_id) == JobStatus.RUNNING


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


async def until(client: AsyncClient, check: "object", timeout: float = 15) -> State:
    """Follow the log until ``check(state)`` holds."""
    async with asyncio.timeout(timeout), contextlib.aclosing(client.states()) as states:
        async for state in states:
            if check(state):  # type: ignore[operator]
                return state
    raise AssertionError("unreachable")


async def test_a_job_runs_and_its_events_are_in_order(client: AsyncClient, tmp_path: Path) -> None:
    out = tmp_path / "result.txt"
    code = (
        "import os; open(os.environ['OUT'], 'w')"
        ".write(os.environ['CUDA_VISIBLE_DEVICES'] + ' ' + os.environ['ALLOT_JOB_ID'])"
    )
    reply = await client.submit(
        JobSpec(account="lab/alice", gpus=2, command=python(code), env={"OUT": str(out)})
    )
    assert reply.job_id is not None
    job = await client.wait(reply.job_id, timeout=20)

    assert job.status == JobStatus.SUCCEEDED
    assert job.exit_code == 0
    assert out.read_text() == f"{','.join(map(str, job.gpus))} {job.job_id}"
    assert len(job.gpus) == 2
    trail = [
        r.type
        for r in await client.events.read()
        if (r.type in {"JobSubmitted", "JobStarted", "JobExited"} and reply.job_id in r.subject)
        or (
            r.type == "PlanComputed"
            and r.event is not None
            and any(a.job_id == reply.job_id for a in r.event.admissions)
        )  # type: ignore[attr-defined]
    ]
    assert trail == ["JobSubmitted", "PlanComputed", "JobStarted", "JobExited"]


async def test_every_plan_names_the_prefix_it_was_computed_from(client: AsyncClient) -> None:
    for gpus in (1, 2, 4, 4):
        await client.submit(
            JobSpec(account="lab/bob", gpus=gpus, command=python("import time; time.sleep(0.5)"))
        )
    await until(client, lambda s: sum(j.status.terminal for j in s.jobs.values()) == 4, timeout=30)
    plans = [r for r in await client.events.read() if r.type == "PlanComputed"]
    assert plans
    previous = 0
    for record in plans:
        # Computed from a prefix that already held the plan before it: plans never overlap.
        basis = record.event.basis_seq  # type: ignore[union-attr]
        assert previous <= basis < record.seq
        previous = record.seq


async def test_cancel_stops_a_running_job(client: AsyncClient) -> None:
    reply = await client.submit(
        JobSpec(account="lab/a", gpus=1, command=python("import time; time.sleep(60)"))
    )
    assert reply.job_id is not None
    job_id = reply.job_id
    await until(client, lambda s: running(s, job_id))
    await client.cancel(job_id)
    job = await client.wait(job_id, timeout=15)
    assert job.status == JobStatus.CANCELLED
    assert job.exit_code == -15  # SIGTERM reached the job itself


async def test_a_killed_node_agent_ends_in_node_lost_and_its_job_is_not_left_running(
    stack: Stack, client: AsyncClient
) -> None:
    spec = JobSpec(account="lab/a", gpus=4, command=python("import time; time.sleep(60)"))
    reply = await client.submit(spec)
    assert reply.job_id is not None
    job_id = reply.job_id
    state = await until(client, lambda s: running(s, job_id))
    node_id = state.jobs[job_id].node_id
    assert node_id == "node-1"

    stack.kill(node_id)
    state = await until(client, lambda s: node_id in s.nodes and s.nodes[node_id].lost, timeout=20)
    job = state.jobs[job_id]
    assert job.status == JobStatus.LOST
    assert state.nodes[node_id].allocated == {}
    assert "node-1 lost" in job.end_reason

    # The agent comes back: the node is usable again and the orphaned process is killed.
    pid = job.pid
    assert pid is not None
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


def test_the_cli_submits_waits_and_shows_status(stack: Stack) -> None:
    env = {**os.environ, "ALLOT_NATS_URL": stack.url}

    def allot(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "allot.client.cli", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    submit = ["submit", "--gpus", "1", "--account", "demo", "--wait"]
    done = allot(*submit, "--", sys.executable, "-c", "print(42)")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "42"
    job_id = done.stderr.split()[0]

    failing = allot(*submit, "--quiet", "--", sys.executable, "-c", "raise SystemExit(3)")
    assert failing.returncode == 3

    status = allot("status", job_id, "--json")
    assert status.returncode == 0
    assert '"status": "succeeded"' in status.stdout

    bad = allot("submit", "--gpus", "0", "--account", "demo", "--", "true")
    assert bad.returncode == 2
    assert "gpus='0'" in bad.stderr
    assert "at least 1" in bad.stderr

    tail = allot("log", "tail", "-n", "50")
    assert "JobExited" in tail.stdout
    assert "PlanComputed" in tail.stdout
    assert job_id in allot("status").stdout
    assert "node-1" in allot("nodes").stdout


async def test_a_node_declared_lost_while_alive_kills_its_jobs_and_registers_again(
    stack: Stack, client: AsyncClient
) -> None:
    reply = await client.submit(
        JobSpec(account="lab/a", gpus=2, command=python("import time; time.sleep(60)"))
    )
    assert reply.job_id is not None
    job_id = reply.job_id
    state = await until(client, lambda s: running(s, job_id))
    node_id = state.jobs[job_id].node_id
    pid = state.jobs[job_id].pid
    assert node_id is not None
    assert pid is not None

    # As if telemetry had missed its heartbeats.
    await client.events.append(b.lost(node_id))
    state = await until(client, lambda s: status(s, job_id) == JobStatus.LOST)
    lost_at = state.seq
    await until(client, lambda s: s.seq > lost_at and not s.nodes[node_id].lost)
    await gone(pid)


async def test_allot_up_restarts_a_service_that_dies(tmp_path: Path) -> None:
    s = Stack(tmp_path / "allot", [NodeShape(node_id="node-1", gpus=1)], restart=True)
    async with s, await AsyncClient.connect(s.url) as client:
        planner = s.children["planner"].process
        assert planner is not None
        planner.kill()
        await planner.wait()
        reply = await client.submit(JobSpec(account="lab/a", gpus=1, command=python("pass")))
        assert reply.job_id is not None
        job = await client.wait(reply.job_id, timeout=20)
        assert job.status == JobStatus.SUCCEEDED
        assert s.children["planner"].process is not planner


async def test_a_job_that_cannot_start_fails_and_frees_its_gpus(client: AsyncClient) -> None:
    broken = await client.submit(
        JobSpec(account="lab/a", gpus=4, command=python("pass"), workdir="/nonexistent/dir")
    )
    assert broken.job_id is not None
    job = await client.wait(broken.job_id, timeout=15)
    assert job.status == JobStatus.FAILED
    assert job.exit_code is None
    assert "could not start" in job.end_reason
    # Its GPUs are free again: a job needing the whole node runs.
    after = await client.submit(JobSpec(account="lab/a", gpus=4, command=python("pass")))
    assert after.job_id is not None
    assert (await client.wait(after.job_id, timeout=15)).status == JobStatus.SUCCEEDED


async def test_processes_a_job_leaves_behind_end_with_it(
    client: AsyncClient, tmp_path: Path
) -> None:
    pid_file = tmp_path / "child.pid"
    code = (
        "import subprocess, sys\n"
        "child = subprocess.Popen(['sleep', '60'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
    )
    reply = await client.submit(JobSpec(account="lab/a", gpus=1, command=python(code)))
    assert reply.job_id is not None
    job = await client.wait(reply.job_id, timeout=15)
    assert job.status == JobStatus.SUCCEEDED
    await gone(int(pid_file.read_text()))


async def test_every_recorded_plan_is_recomputed_from_its_basis(client: AsyncClient) -> None:
    for gpus in (4, 2, 2, 1, 4):
        await client.submit(
            JobSpec(account="lab/c", gpus=gpus, command=python("import time; time.sleep(0.2)"))
        )
    await until(
        client, lambda s: len(s.jobs) == 5 and all(j.status.terminal for j in s.jobs.values())
    )
    records = await client.events.read()
    plans = [r for r in records if isinstance(r.event, PlanComputed)]
    assert len(plans) >= 2
    for record in plans:
        recorded = record.event
        assert isinstance(recorded, PlanComputed)
        state = State()
        for earlier in records[: recorded.basis_seq]:
            apply_record(state, earlier)
        assert state.seq == recorded.basis_seq
        again = plan(state, recorded.now, POLICY_FIRST_FIT)
        assert recorded.policy_hash == policy_hash(POLICY_FIRST_FIT)
        assert again.admissions == recorded.admissions
        assert again.pending == recorded.pending


async def test_a_job_cancelled_before_its_agent_started_it_never_runs(tmp_path: Path) -> None:
    nodes = [NodeShape(node_id="node-1", gpus=2)]
    async with (
        Stack(tmp_path / "allot", nodes, node_timeout_s=60, restart=False) as s,
        await AsyncClient.connect(s.url) as client,
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
