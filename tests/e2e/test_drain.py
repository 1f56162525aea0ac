"""Drains through the real services: a graceful one lets a job that cannot resume finish,
a drain --now stops it (and says so first)."""

import asyncio
import json
import os
import pty
import subprocess
import sys
from pathlib import Path

from allot.bus.tls import CA_ENV
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


def on_a_terminal(stack: Stack, answer: str, *args: str) -> "subprocess.CompletedProcess[str]":
    """The command line with a terminal for its input, answering ``answer``."""
    ours, theirs = pty.openpty()
    env = {**os.environ, "ALLOT_NATS_URL": stack.url, "ALLOT_IDENTITY": str(stack.operator)}
    if stack.tls_ca is not None:
        env[CA_ENV] = str(stack.tls_ca)
    os.write(ours, answer.encode())
    try:
        return subprocess.run(
            [sys.executable, "-m", "allot.client.cli", *args], env=env, stdin=theirs,
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    finally:
        os.close(ours)
        os.close(theirs)


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

    declined = on_a_terminal(stack, "n\n", "nodes", "cordon", node, "--drain", "--now")
    assert declined.returncode == 1
    assert f"{job}: cannot resume" in declined.stderr
    assert f"drain {node} now? [y/N]" in declined.stderr
    assert declined.stderr.rstrip().endswith("allot: nothing changed")

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
    unknown = cli(stack, "nodes", "cordon", "no-such-node", "--drain", "--now", "--yes")
    assert unknown.returncode == 2
    assert "no such node" in unknown.stderr
