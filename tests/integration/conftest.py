"""Fixtures of the integration tests: the intake service running against the real
nats-server of ``tests/conftest.py``, with one 8-GPU node registered."""

import asyncio
from collections.abc import AsyncIterator

import pytest

from allot.bus import EventLog
from allot.services.intake.app import Intake
from tests import builders as b


@pytest.fixture
async def intake(event_log: EventLog) -> AsyncIterator[Intake]:
    await event_log.append(b.node("n1", 8))
    service = Intake(event_log)
    running = asyncio.create_task(service.run())
    yield service
    running.cancel()
