"""Silence that is no evidence of a node's death, with the whole stack running as
processes: a NATS outage longer than the node timeout, every node agent frozen at once, and
telemetry itself frozen. None may lose a node or kill a job; a node that really dies
afterwards is still lost."""

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest

from allot.client import AsyncClient
from allot.client.stack import NodeShape, Stack
from allot.core import JobStatus, State
from allot.proto.events import JobSpec
from allot.proto.subjects import HEARTBEATS
from tests.stack import gone, python, running, until

NODE_TIMEOUT_S = 10.0
SILENCE_S = 12.0  # a little longer than the node timeout, as in the reported run
NODES = ("node-1", "node-2")

Pids = dict[str, dict[str, int]]  # job id -> node id -> pid


@contextlib.asynccontextmanager
async def busy_cluster(
    tmp_path: Path, node_ids: tuple[str, ...] = NODES
) -> AsyncIterator[tuple[Stack, Pids]]:
    """Nodes of 8 GPUs, each running two long jobs."""
    nodes = [NodeShape(node_id=n, gpus=8) for n in node_ids]
    async with (
        Stack(tmp_path / "allot", nodes, node_timeout_s=NODE_TIMEOUT_S, stop_grace_s=2) as stack,
        await stack.client() as client,
    ):
        spec = JobSpec(account="lab/a", gpus=4, command=python("import time; time.sleep(600)"))
        job_ids = []
        for _ in range(2 * len(node_ids)):
            reply = await client.submit(spec)
            assert reply.job_id is not None
            job_ids.append(reply.job_id)
        state = await until(client, lambda s: all(running(s, j) for j in job_ids))
        pids = {j: state.jobs[j].started_on for j in job_ids}
        assert sorted(n for placed in pids.values() for n in placed) == sorted(2 * node_ids)
        yield stack, pids


async def heard_from_every_node(
    client: AsyncClient, node_ids: tuple[str, ...], timeout: float = 30
) -> None:
    """Wait for a heartbeat from each node: their agents are back on the bus."""
    unheard = set(node_ids)
    sub = await client.events.nc.subscribe(HEARTBEATS)
    try:
        async with asyncio.timeout(timeout):
            while unheard:
                msg = await sub.next_msg(timeout=None)
                unheard.discard(msgspec.json.decode(msg.data)["node_id"])
    finally:
        await sub.unsubscribe()


async def assert_nothing_lost(client: AsyncClient, pids: Pids) -> None:
    await heard_from_every_node(client, tuple({n for placed in pids.values() for n in placed}))
    await asyncio.sleep(3)  # time for a loss decided in the silence to reach the log
    state = await client.state()
    assert lost_nodes(state) == []
    for job_id, started_on in pids.items():
        assert state.jobs[job_id].status == JobStatus.RUNNING
        assert state.jobs[job_id].started_on == started_on
        assert all(alive(pid) for pid in started_on.values())


@pytest.mark.slow
async def test_a_nats_outage_longer_than_the_node_timeout_loses_no_node_and_kills_no_job(
    tmp_path: Path,
) -> None:
    async with busy_cluster(tmp_path) as (stack, pids):
        await stack.nats.stop()
        await asyncio.sleep(SILENCE_S)
        await stack.nats.start()

        # The first client gave up reconnecting during the outage; a fresh one.
        async with await stack.client() as client:
            await client.ready()
            await assert_nothing_lost(client, pids)

            # A node that really dies now is still declared lost; the other lives on.
            stack.kill("node-1")
            state = await until(
                client, lambda s: "node-1" in s.nodes and s.nodes["node-1"].lost, timeout=30
            )
            assert lost_nodes(state) == ["node-1"]
            on_node_2 = [j for j, started_on in pids.items() if "node-2" in started_on]
            for job_id in pids:
                job = state.jobs[job_id]
                assert job.status == (JobStatus.RUNNING if job_id in on_node_2 else JobStatus.LOST)

            # And the surviving agent acts on the log again.
            await client.cancel(on_node_2[0])
            job = await client.wait(on_node_2[0], timeout=30)
            assert job.status == JobStatus.CANCELLED
            await gone(pids[on_node_2[0]]["node-2"])
            assert alive(pids[on_node_2[1]]["node-2"])


@pytest.mark.slow
async def test_every_node_falling_silent_together_loses_no_node(tmp_path: Path) -> None:
    async with busy_cluster(tmp_path) as (stack, pids):
        agents = [stack.children[n].process for n in NODES]
        try:
            for agent in agents:  # telemetry stays on the bus, but hears no node
                assert agent is not None
                os.kill(agent.pid, signal.SIGSTOP)
            await asyncio.sleep(SILENCE_S)
        finally:
            for agent in agents:
                assert agent is not None
                os.kill(agent.pid, signal.SIGCONT)
        async with await stack.client() as client:
            await assert_nothing_lost(client, pids)


@pytest.mark.slow
async def test_telemetry_frozen_past_the_node_timeout_loses_no_node(tmp_path: Path) -> None:
    """One node, so no silence of many nodes together holds the loss off: telemetry itself
    stops (a paused process, a stalled event loop) and the heartbeats of that time wait
    unread in its socket. On its return it must not take its own deafness for the node's."""
    async with busy_cluster(tmp_path, ("node-1",)) as (stack, pids):
        telemetry = stack.children["telemetry"].process
        assert telemetry is not None
        os.kill(telemetry.pid, signal.SIGSTOP)
        try:
            await asyncio.sleep(SILENCE_S)
        finally:
            os.kill(telemetry.pid, signal.SIGCONT)
        async with await stack.client() as client:
            await assert_nothing_lost(client, pids)
        assert "stalled" in (stack.logs / "telemetry.log").read_text()


def lost_nodes(state: State) -> list[str]:
    return sorted(node_id for node_id, node in state.nodes.items() if node.lost)


def alive(pid: int) -> bool:
    """A process that exists and is no zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def test_services_act_on_the_log_soon_after_the_bus_returns(tmp_path: Path) -> None:
    # A follower used to wait for the heartbeats its lost consumer would never send: 10 to
    # 20 s of blindness after the bus returned, in every service.
    async with busy_cluster(tmp_path) as (stack, pids):
        await stack.nats.stop()
        await asyncio.sleep(3)
        await stack.nats.start()
        async with await stack.client() as client:
            await client.ready()
            job_id = next(j for j, started_on in pids.items() if "node-1" in started_on)
            started = asyncio.get_running_loop().time()
            await client.cancel(job_id)
            await gone(pids[job_id]["node-1"], timeout=30)
            assert asyncio.get_running_loop().time() - started < 6
