"""Who may create the log's stream, and what the others do before it exists."""

import asyncio
from pathlib import Path

from allot.bus import EmbeddedNats, EventLog
from allot.bus.identity import Keyring, load


async def test_a_node_agent_that_may_not_create_the_stream_waits_for_it(tmp_path: Path) -> None:
    keyring = Keyring(tmp_path / "identities")
    keyring.ensure("admin", "operator")  # the server's readiness is checked as an operator
    node = load(keyring.ensure("node-1", "node", "node-1"))
    planner = load(keyring.ensure("planner", "planner"))
    async with EmbeddedNats(tmp_path / "nats", keyring=keyring) as server:
        connecting = asyncio.create_task(EventLog.connect(server.url, identity=node))
        await asyncio.sleep(3)  # longer than a JetStream request's timeout
        assert not connecting.done()  # waiting, not failed
        created = await EventLog.connect(server.url, identity=planner)
        agent = await asyncio.wait_for(connecting, 10)
        assert await agent.last_seq() == 0
        await agent.close()
        await created.close()
