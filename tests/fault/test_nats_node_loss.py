"""The whole stack on a JetStream cluster of three nats-servers: when one of them dies (the
one leading the log), the services find another, submissions go through and jobs run."""

import asyncio
import os
import signal
from pathlib import Path

from allot.bus.cluster import NatsCluster
from allot.bus.identity import load
from allot.client import AsyncClient
from allot.client.stack import NodeShape, Stack
from allot.core import JobStatus
from allot.proto.events import JobSpec
from allot.proto.subjects import MIRROR, STREAM
from tests.stack import cli, python


async def test_the_stack_schedules_on_when_the_logs_leader_dies(tmp_path: Path) -> None:
    nodes = [NodeShape(node_id="node-1", gpus=2)]
    stack = Stack(
        tmp_path / "allot", nodes, node_timeout_s=5, heartbeat_s=0.2, stop_grace_s=2,
        restart=False, nats_cluster=3,
    )  # fmt: skip
    async with stack, await stack.client() as client:
        assert isinstance(stack.nats, NatsCluster)
        assert stack.keyring is not None
        alice = load(stack.keyring.add("alice", "user"))
        stack.nats.reload()  # every member admits her
        async with await AsyncClient.connect(stack.url, alice) as reader:
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

        after = await client.submit(JobSpec(account="lab/a", gpus=2, command=python("2")))
        assert after.job_id is not None
        assert (await client.wait(after.job_id, timeout=45)).status == JobStatus.SUCCEEDED
        await client.ready(30, ("intake", "ledger", "view"))
        state = await client.state()
        assert not state.nodes["node-1"].lost  # its agent's heartbeats found another member
        async with await AsyncClient.connect(stack.url, alice) as reader:
            began = asyncio.get_running_loop().time()
            async with asyncio.timeout(60):  # the users' mirror catches up too
                while not any(after.job_id in r.subject for r in await reader.events.read()):
                    await asyncio.sleep(0.2)
            print(f"mirror caught up in {asyncio.get_running_loop().time() - began:.1f}s")
        verified = cli(stack, "replay", "--verify")
        assert verified.returncode == 0, verified.stderr
        assert "all match" in verified.stdout
        assert all(c.process and c.process.returncode is None for c in stack.children.values())
