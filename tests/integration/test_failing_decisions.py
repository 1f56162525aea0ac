"""A decision that fails (the bus too slow to take its event, a bug) is logged and made
again on the next event or look; it never ends the service."""

import asyncio
from typing import Any

from allot.bus import EventLog
from allot.core import State
from allot.proto.events import NodeLost
from allot.services.runtime import follow_state
from allot.services.telemetry.app import Telemetry
from tests import builders as b
from tests.aio import background


async def test_the_log_is_followed_on_after_a_decision_fails(event_log: EventLog) -> None:
    state, calls = State(), []

    async def decide() -> None:
        calls.append(state.seq)
        if len(calls) == 2:
            raise TimeoutError("the bus took too long")

    async with background(follow_state(event_log, state, decide)) as [following]:
        async with asyncio.timeout(10):
            while not calls:  # on the empty log
                await asyncio.sleep(0.01)
        for n in range(3):
            await event_log.append(b.node(f"n{n}"))
            async with asyncio.timeout(10):
                while state.seq <= n or len(calls) < n + 2:
                    assert not following.done(), following.exception()
                    await asyncio.sleep(0.01)
    assert calls == [0, 1, 2, 3]


async def test_telemetry_declares_a_loss_it_failed_to_append_at_its_next_look(
    event_log: EventLog,
) -> None:
    appended = event_log.append
    refusals: list[str] = []

    async def append_refusing_the_first_loss(event: Any, **kwargs: Any) -> Any:
        if isinstance(event, NodeLost) and not refusals:
            refusals.append(event.node_id)
            raise TimeoutError("nats: timeout")
        return await appended(event, **kwargs)

    event_log.append = append_refusing_the_first_loss  # type: ignore[method-assign]
    await event_log.append(b.node("n1"))
    telemetry = Telemetry(event_log, node_timeout_s=0.5)
    async with background(telemetry.run()) as [watching], asyncio.timeout(10):
        while not (telemetry.state.nodes.get("n1") and telemetry.state.nodes["n1"].lost):
            assert not watching.done(), watching.exception()
            await asyncio.sleep(0.05)
    assert refusals == ["n1"]
