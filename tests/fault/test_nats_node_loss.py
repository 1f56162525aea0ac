"""The whole stack on a JetStream cluster of three nats-servers, with identities, TLS (on the
routes too) and the dashboard's websocket: when one of them dies (the one leading the
log), the services find another, submissions go through and jobs run."""

import asyncio
import os
import signal
from pathlib import Path

import nats.errors
import pytest

from allot.bus.cluster import NatsCluster
from allot.bus.identity import load
from allot.bus.tls import client_context
from allot.client import AsyncClient
from allot.client.stack import NodeShape, Stack
from allot.core import JobStatus
from allot.proto.events import JobSpec
from allot.proto.subjects import MIRROR, STREAM
from tests.integration.test_tls import server_info
from tests.stack import cli, python


async def holds(reader: AsyncClient, job_id: str) -> bool:
    """Whether the users' mirror holds an event of ``job_id``; False while it cannot say
    (while the mirror, too, has no leader)."""
    try:
        return any(job_id in r.subject for r in await reader.events.read())
    except nats.errors.TimeoutError:
        return False


@pytest.mark.slow
async def test_the_stack_schedules_on_when_the_logs_leader_dies(tmp_path: Path) -> None:
    nodes = [NodeShape(node_id="node-1", gpus=2)]
    stack = Stack(
        tmp_path / "allot", nodes, node_timeout_s=5, heartbeat_s=0.2, stop_grace_s=2,
        restart=False, nats_cluster=3, tls=True, websocket=True,
    )  # fmt: skip
    loop = asyncio.get_running_loop()
    async with stack, await stack.client() as client:
        assert isinstance(stack.nats, NatsCluster)
        assert (await server_info(stack.nats.members[1]))["tls_required"] is True
        assert stack.nats.websocket_url is not None
        host, port = stack.nats.websocket_url.rsplit("/", 1)[1].split(":")
        _, websocket = await asyncio.open_connection(host, int(port))
        websocket.close()
        assert stack.keyring is not None
        alice = load(stack.keyring.add("alice", "user"))
        assert stack.tls_ca is not None
        tls = client_context(str(stack.tls_ca))
        stack.nats.reload()  # every member admits her
        async with await AsyncClient.connect(stack.url, alice, tls) as reader:
            mirror = await reader.events.js.stream_info(MIRROR)
        log = await client.events.js.stream_info(STREAM)
        assert (log.config.num_replicas, mirror.config.num_replicas) == (3, 3)
        assert log.cluster is not None
        assert log.cluster.leader is not None

        before = await client.submit(JobSpec(account="lab/a", gpus=1, command=python("1")))
        assert before.job_id is not None
        assert (await client.wait(before.job_id, timeout=30)).status == JobStatus.SUCCEEDED
        victim = stack.nats.member(log.cluster.leader)
        assert victim.pid is not None
        os.kill(victim.pid, signal.SIGKILL)
        killed_at = loop.time()

        after = await client.submit(JobSpec(account="lab/a", gpus=2, command=python("2")))
        assert after.job_id is not None
        assert (await client.wait(after.job_id, timeout=45)).status == JobStatus.SUCCEEDED
        ran_at = loop.time()
        await client.ready(30, ("intake", "ledger", "view"))
        state = await client.state()
        assert not state.nodes["node-1"].lost  # its agent's heartbeats found another member
        async with await AsyncClient.connect(stack.url, alice, tls) as reader:
            async with asyncio.timeout(90):  # the users' mirror catches up too, later
                while not await holds(reader, after.job_id):
                    await asyncio.sleep(0.5)
        print(f"\nthe log's leader killed: a job submitted and run after "
              f"{ran_at - killed_at:.1f}s, the users' mirror had it after "
              f"{loop.time() - killed_at:.1f}s")  # fmt: skip
        verified = cli(stack, "replay", "--verify")
        assert verified.returncode == 0, verified.stderr
        assert "all match" in verified.stdout
        assert all(c.process and c.process.returncode is None for c in stack.children.values())
