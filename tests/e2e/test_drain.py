"""Drains through the real services: a graceful one lets a job that cannot resume finish,
a drain --now stops it (and says so first)."""

import asyncio
import json
from pathlib import Path

from allot.client import AsyncClient
from allot.client.stack import Stack
from allot.core import JobStatus, State
from allot.proto.events import JobSpec, NodeCordoned, NodeDrained, StopRequested
from tests.stack import cli, python, running, until

S = 10**9


def waiting_for(marker: Path) -> list[str]:
    """A job that cannot resume, running until ``marker`` exists, then done."""
    return python(
        "import pathlib, time\n"
        f"while not pathlib.Path({str(marker)!r}).exists(): time.sleep(0.05)\n"
    )


async def logged(client: AsyncClient, kind: type) -> list:  # type: ignore[type-arg]
    return [r.event for r in await client.events.read() if isinstance(r.event, kind)]


async def test_a_job_that_cannot_resume_finishes_on_a_graceful_drain_which_then_ends(
    stack: Stack, client: AsyncClient, tmp_path: Path
) -> None:
    submitted = await client.submit(
        JobSpec(account="lab/x", gpus=1, command=waiting_for(tmp_path / "done"),
                max_runtime_ns=600 * S)
    )  # fmt: skip
    assert submitted.job_id is not None
    job = submitted.job_id
    state = await until(client, lambda s: running(s, job))
    [node] = state.jobs[job].placements

    drained = cli(stack, "nodes", "cordon", node, "--drain", "--reason", "maintenance")
    assert drained.returncode == 0, drained.stderr
    assert f"waits for {job} (left to finish, by " in drained.stdout
    shown = cli(stack, "nodes", "show", node)
    assert "draining" in shown.stdout
    assert f"waits for {job}" in shown.stdout
    listed = json.loads(cli(stack, "nodes", "--json").stdout)
    assert [(n["draining"], n["drain_now"]) for n in listed if n["node_id"] == node] == [
        (True, False)
    ]
    await asyncio.sleep(2)  # several plans and preemptor ticks
    assert await logged(client, StopRequested) == []
    state = await client.state()
    assert state.jobs[job].status == JobStatus.RUNNING
    assert not state.nodes[node].drained

    (tmp_path / "done").touch()
    done = await client.wait(job, timeout=30)
    assert done.status == JobStatus.SUCCEEDED

    def empty(s: State) -> bool:
        return node in s.nodes and s.nodes[node].drained

    await until(client, empty)
    [end] = await logged(client, NodeDrained)
    assert done.ended_at is not None
    assert end.meta.at >= done.ended_at


async def test_a_drain_now_says_what_it_loses_wants_yes_without_a_terminal_and_stops_all(
    stack: Stack, client: AsyncClient, tmp_path: Path
) -> None:
    submitted = await client.submit(
        JobSpec(account="lab/x", gpus=1, command=waiting_for(tmp_path / "never"))
    )
    assert submitted.job_id is not None
    job = submitted.job_id
    state = await until(client, lambda s: running(s, job))
    [node] = state.jobs[job].placements

    unconfirmed = cli(stack, "nodes", "cordon", node, "--drain", "--now")
    assert unconfirmed.returncode == 2
    assert len(unconfirmed.stderr.splitlines()) == 1
    assert "add --yes" in unconfirmed.stderr
    assert await logged(client, NodeCordoned) == []

    confirmed = cli(stack, "nodes", "cordon", node, "--drain", "--now", "--yes")
    assert confirmed.returncode == 0, confirmed.stderr
    assert f"{job}: cannot resume" in confirmed.stderr
    assert "draining --now" in confirmed.stdout
    [cordon] = await logged(client, NodeCordoned)
    assert (cordon.drain, cordon.now) == (True, True)
    lost = await client.wait(job, timeout=30)
    assert lost.status == JobStatus.LOST
