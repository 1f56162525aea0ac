"""Preemption through the real services: stop, checkpoint, requeue, resume; kill after the
grace period; drains; a preemptor restarted in the middle."""

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

from allot.client import AsyncClient
from allot.client.stack import Stack
from allot.core import JobStatus, State
from allot.proto.events import (
    GraceTooShort,
    JobPreempted,
    JobSpec,
    JobStarted,
    JobSubmitted,
    KillRequested,
    NodeDrained,
    StopRequested,
)
from tests.stack import cli, python, running, until

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
S = 10**9
TRAIN = {"TRAIN_STEPS": "150", "STEP_SECONDS": "0.02", "CHECKPOINT_EVERY": "10"}


def training(gpus: int, result: Path, **fields: object) -> JobSpec:
    return JobSpec(
        account="lab/train",
        gpus=gpus,
        command=[sys.executable, str(EXAMPLES / "train_numpy.py")],
        env={**TRAIN, "RESULT": str(result)},
        resumable=True,
        grace_ns=20 * S,
        **fields,  # type: ignore[arg-type]
    )


def uninterrupted(tmp_path: Path) -> str:
    """The training example run straight through, outside Allot: the result to match."""
    env = {
        **os.environ, **TRAIN, "RESULT": str(tmp_path / "reference.json"),
        "ALLOT_JOB_ID": "reference", "ALLOT_CHECKPOINT_DIR": str(tmp_path / "reference"),
    }  # fmt: skip
    subprocess.run([sys.executable, str(EXAMPLES / "train_numpy.py")], env=env, check=True)
    return (tmp_path / "reference.json").read_text()


async def events_of(client: AsyncClient, job_id: str, kind: type) -> list:  # type: ignore[type-arg]
    return [
        r.event
        for r in await client.events.read()
        if isinstance(r.event, kind) and getattr(r.event, "job_id", None) == job_id
    ]


def checkpointed(job_id: str) -> "callable":  # type: ignore[valid-type]
    return lambda s: s.jobs.get(job_id) is not None and s.jobs[job_id].checkpoint_step >= 1


async def test_an_interactive_job_preempts_training_which_resumes_to_the_same_result(
    stack: Stack, client: AsyncClient, tmp_path: Path
) -> None:
    reply = await client.submit(training(4, tmp_path / "result.json"))
    assert reply.job_id is not None
    train = reply.job_id
    await until(client, checkpointed(train), timeout=30)

    notebook = await client.submit(
        JobSpec(account="lab/nb", gpus=4, tier="interactive", command=python("print('hi')"))
    )
    assert notebook.job_id is not None
    assert (await client.wait(notebook.job_id, timeout=30)).status == JobStatus.SUCCEEDED
    done = await client.wait(train, timeout=60)

    assert done.status == JobStatus.SUCCEEDED
    assert (done.attempts, done.preemptions) == (1, 1)
    assert (tmp_path / "result.json").read_text() == uninterrupted(tmp_path)
    assert "resumed from step" in Path(done.output_path or "").read_text()
    [stop] = await events_of(client, train, StopRequested)
    assert stop.reason == f"TIER for {notebook.job_id}"
    [preempted] = await events_of(client, train, JobPreempted)
    # Lost: at most the checkpoint interval (10 steps of 20 ms) and the stop, on 4 GPUs.
    assert 0 <= preempted.lost_gpu_ms < 4 * 2_000
    story = cli(stack, "explain", train).stdout
    for step in ("admitted: to node-1", "preempting: chosen to stop: TIER(for", "preempted: lost"):
        assert step in story, story
    assert story.index("preempted: lost") < story.index("requeued: preempted")
    submitted = (await events_of(client, notebook.job_id, JobSubmitted))[0].meta.at
    started = (await events_of(client, notebook.job_id, JobStarted))[0].meta.at
    print(
        f"\npreemption: lost {preempted.lost_gpu_ms / 1000:.2f} GPU-s; "
        f"interactive job submitted -> started in {(started - submitted) / 1e6:.0f} ms"
    )


def ignoring_sigterm(ready: Path) -> list[str]:
    """A job that ignores SIGTERM, and says so in ``ready`` once it does."""
    code = (
        "import pathlib, signal, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "pathlib.Path(sys.argv[1]).touch()\n"
        "time.sleep(120)\n"
    )
    return [*python(code), str(ready)]


async def ready(path: Path) -> None:
    async with asyncio.timeout(20):
        while not path.exists():
            await asyncio.sleep(0.02)


async def test_a_job_that_ignores_sigterm_is_killed_after_its_grace_and_its_work_is_lost(
    stack: Stack, client: AsyncClient, tmp_path: Path
) -> None:
    stubborn = await client.submit(
        JobSpec(account="lab/x", gpus=4, grace_ns=1 * S, command=ignoring_sigterm(tmp_path / "r"))
    )
    assert stubborn.job_id is not None
    job_id = stubborn.job_id
    await ready(tmp_path / "r")
    notebook = await client.submit(
        JobSpec(account="lab/nb", gpus=4, tier="interactive", command=["true"])
    )
    assert notebook.job_id is not None
    ended = await client.wait(job_id, timeout=30)

    assert ended.status == JobStatus.LOST
    assert ended.end_reason == "preempted; not resumable"
    assert len(await events_of(client, job_id, KillRequested)) == 1
    [warning] = await events_of(client, job_id, GraceTooShort)
    assert warning.measured_ns >= warning.grace_ns == 1 * S
    [preempted] = await events_of(client, job_id, JobPreempted)
    assert preempted.lost_gpu_ms >= 4 * 1000  # everything since it started: at least 1 s
    assert ended.lost_gpu_ms == preempted.lost_gpu_ms
    assert (await client.wait(notebook.job_id, timeout=30)).status == JobStatus.SUCCEEDED
    shown = cli(stack, "status", job_id).stdout
    assert "grace period (1s) is too short" in shown
    assert "preempted  1 time(s)" in shown


async def test_a_gang_is_stopped_whole_and_runs_again_whole(
    client: AsyncClient, tmp_path: Path
) -> None:
    gang = await client.submit(
        JobSpec(
            account="lab/g", workers=3, gpus=2, resumable=True, grace_ns=5 * S,
            command=python(
                "import os, sys, time\n"
                "from allot import workload\n"
                "start = time.time()\n"
                "while time.time() - start < (3 if os.environ['ALLOT_ATTEMPT'] == '0' else 0.2):\n"
                "    if workload.should_stop(): sys.exit(0)\n"
                "    time.sleep(0.02)\n"
            ),
        )
    )  # fmt: skip
    assert gang.job_id is not None
    gang_id = gang.job_id
    await until(client, lambda s: running(s, gang_id) and len(s.jobs[gang_id].started_on) == 2)
    notebook = await client.submit(
        JobSpec(account="lab/nb", gpus=4, tier="interactive", command=python("print(1)"))
    )
    assert notebook.job_id is not None
    assert (await client.wait(notebook.job_id, timeout=30)).status == JobStatus.SUCCEEDED
    done = await client.wait(gang_id, timeout=30)
    assert done.status == JobStatus.SUCCEEDED
    assert done.preemptions == 1
    assert len(await events_of(client, gang_id, StopRequested)) == 1
    starts = await events_of(client, gang_id, JobStarted)
    assert sorted((s.attempt, s.node_id) for s in starts) == [
        (0, "node-1"), (0, "node-2"), (1, "node-1"), (1, "node-2"),
    ]  # fmt: skip


async def test_a_funded_job_inside_its_minimum_runtime_is_not_preempted(
    stack: Stack, client: AsyncClient
) -> None:
    granted = cli(stack, "budget", "grant", "lab", "--gpu-hours", "100", "--period", "7d")
    assert granted.returncode == 0, granted.stderr
    protected = await client.submit(
        JobSpec(
            account="lab/p", gpus=4, min_runtime_ns=3600 * S,
            command=python("import time; time.sleep(60)"),
        )
    )  # fmt: skip
    assert protected.job_id is not None
    job_id = protected.job_id
    state = await until(client, lambda s: running(s, job_id))
    assert state.jobs[job_id].funded
    notebook = await client.submit(
        JobSpec(account="lab/nb", gpus=4, tier="interactive", command=["true"])
    )
    assert notebook.job_id is not None
    nb = notebook.job_id
    state = await until(client, lambda s: nb in s.jobs and s.jobs[nb].reason is not None)
    await asyncio.sleep(2)  # several plans and preemptor ticks
    assert await events_of(client, job_id, StopRequested) == []
    assert (await client.state()).jobs[job_id].status == JobStatus.RUNNING


async def test_killing_the_preemptor_mid_preemption_loses_nothing_and_stops_once(
    stack: Stack, client: AsyncClient, tmp_path: Path
) -> None:
    stubborn = await client.submit(
        JobSpec(
            account="lab/x", gpus=4, grace_ns=3 * S, resumable=True,
            command=ignoring_sigterm(tmp_path / "r"),
        )
    )  # fmt: skip
    assert stubborn.job_id is not None
    job_id = stubborn.job_id
    await ready(tmp_path / "r")
    await client.submit(JobSpec(account="lab/nb", gpus=4, tier="interactive", command=["true"]))
    await until(client, lambda s: job_id in s.jobs and s.jobs[job_id].stop is not None)
    stack.kill("preemptor")  # its grace runs out while no preemptor is there
    await asyncio.sleep(4)
    assert await events_of(client, job_id, KillRequested) == []
    await stack.revive("preemptor")
    state = await until(
        client, lambda s: job_id in s.jobs and s.jobs[job_id].attempts == 1, timeout=30
    )
    assert state.jobs[job_id].preemptions == 1
    assert len(await events_of(client, job_id, StopRequested)) == 1
    assert len(await events_of(client, job_id, KillRequested)) == 1
    assert len(await events_of(client, job_id, JobPreempted)) == 1


async def test_draining_a_node_moves_checkpointing_work_without_losing_it(
    stack: Stack, client: AsyncClient, tmp_path: Path
) -> None:
    reply = await client.submit(training(2, tmp_path / "result.json"))
    assert reply.job_id is not None
    train = reply.job_id
    state = await until(client, checkpointed(train), timeout=30)
    [first_node] = state.jobs[train].placements
    drained = cli(stack, "nodes", "cordon", first_node, "--drain", "--reason", "maintenance")
    assert drained.returncode == 0, drained.stderr

    def empty(s: State) -> bool:
        return first_node in s.nodes and s.nodes[first_node].drained

    await until(client, empty, timeout=30)
    done = await client.wait(train, timeout=60)
    assert done.status == JobStatus.SUCCEEDED
    assert first_node not in done.placements  # it finished elsewhere
    assert (tmp_path / "result.json").read_text() == uninterrupted(tmp_path)
    [preempted] = await events_of(client, train, JobPreempted)
    assert preempted.lost_gpu_ms < 2 * 2_000  # at most one checkpoint interval, on 2 GPUs
    drains = [r.event for r in await client.events.read() if isinstance(r.event, NodeDrained)]
    assert [d.node_id for d in drains] == [first_node]
    shown = json.loads(cli(stack, "nodes", "--json").stdout)
    assert next(n for n in shown if n["node_id"] == first_node)["drained"] is True
    assert cli(stack, "nodes", "uncordon", first_node).returncode == 0
    assert cli(stack, "nodes", "cordon", "no-such-node").returncode == 2


async def test_a_job_past_its_max_runtime_is_stopped_and_fails(client: AsyncClient) -> None:
    reply = await client.submit(
        JobSpec(
            account="lab/x", gpus=1, max_runtime_ns=1 * S, grace_ns=5 * S,
            command=python("import time; time.sleep(60)"),
        )
    )  # fmt: skip
    assert reply.job_id is not None
    done = await client.wait(reply.job_id, timeout=30)
    assert done.status == JobStatus.FAILED
    assert done.end_reason == "stopped: max_runtime of 1s reached"
    [stop] = await events_of(client, reply.job_id, StopRequested)
    assert stop.kind == "max_runtime"
    assert done.ended_at is not None
    assert done.started_at is not None
    assert 1 * S <= done.ended_at - done.started_at < 5 * S  # SIGTERM ended it, not SIGKILL
