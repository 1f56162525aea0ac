"""Every test here runs against each kind of log: ``EventLog`` on a real nats-server and
``MemoryEventLog``. Both must pass it; where they part, the contract (``allot.bus.log``)
or the memory log is wrong, never the test's expectations of one of them alone."""

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from allot.bus import EmbeddedNats, EventLog, Log, MemoryEventLog
from allot.proto.subjects import StreamSettings


@pytest.fixture
def settings() -> StreamSettings:
    """How the log is kept; a test that needs others parametrizes ``settings``."""
    return StreamSettings()


@pytest.fixture(params=["nats", "memory"])
async def log(
    request: pytest.FixtureRequest, tmp_path: Path, settings: StreamSettings
) -> AsyncIterator[Log]:
    if request.param == "memory":
        yield MemoryEventLog(settings)
        return
    async with EmbeddedNats(tmp_path / "nats") as server:
        events = await EventLog.connect(server.url, settings=settings)
        try:
            yield events
        finally:
            await events.close()
