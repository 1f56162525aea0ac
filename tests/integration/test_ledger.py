"""The ledger service object against a real NATS server, reached through the client."""

import asyncio
import tomllib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from allot.bus import EmbeddedNats, EventLog
from allot.client import AsyncClient, CommandError
from allot.proto.events import AccountDefined, AccountRemoved, AccountUpdated
from allot.services.ledger.app import Ledger
from tests import builders as b

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "accounts.toml"


@pytest.fixture
async def ledger(event_log: EventLog) -> AsyncIterator[Ledger]:
    service = Ledger(event_log)
    running = asyncio.create_task(service.run())
    yield service
    running.cancel()


@pytest.fixture
async def client(nats_server: EmbeddedNats, ledger: Ledger) -> AsyncIterator[AsyncClient]:
    async with await AsyncClient.connect(nats_server.url) as c:
        await c.ready(timeout=10, services=("ledger",))
        yield c


async def account_events(log: EventLog) -> list[tuple[str, str]]:
    return [
        (r.type, r.event.path)  # type: ignore[union-attr]
        for r in await log.read()
        if isinstance(r.event, AccountDefined | AccountUpdated | AccountRemoved)
    ]


async def test_the_example_tree_is_applied_parents_first(
    client: AsyncClient, event_log: EventLog
) -> None:
    tree = tomllib.loads(EXAMPLE.read_text())["accounts"]
    reply = await client.apply_accounts(tree)
    assert reply.defined == [
        "lab",
        "lab/nlp",
        "lab/platform",
        "lab/vision",
        "lab/nlp/bob",
        "lab/vision/alice",
    ]
    assert [path for _, path in await account_events(event_log)] == reply.defined
    state = await client.state()
    assert state.accounts["lab/vision/alice"].max_wait_ns == 2 * 3600 * 10**9

    again = await client.apply_accounts(tree)  # declarative: nothing to do
    assert (again.defined, again.updated, again.removed) == ([], [], [])
    assert len(await account_events(event_log)) == 6


async def test_a_tree_with_any_problem_changes_nothing(
    client: AsyncClient, event_log: EventLog
) -> None:
    await client.apply_accounts({"lab": {}, "lab/a": {}})
    before = await event_log.last_seq()
    with pytest.raises(CommandError) as refused:
        await client.apply_accounts(
            {"lab": {"weight": -2}, "lab/a": {}, "lab/b": {"quota": {"gpu": "x"}}}
        )
    assert [e.field for e in refused.value.errors] == [
        "accounts.lab.weight",
        "accounts.lab/b.quota",
    ]
    assert await event_log.last_seq() == before


async def test_updates_and_removals(client: AsyncClient, event_log: EventLog) -> None:
    await client.apply_accounts({"lab": {}, "lab/a": {}, "lab/b": {}})
    reply = await client.apply_accounts({"lab": {"weight": 3}, "lab/a": {}})
    assert (reply.updated, reply.removed) == (["lab"], ["lab/b"])
    assert sorted((await client.state()).accounts) == ["lab", "lab/a"]


async def test_an_account_with_a_pending_job_is_not_removed(
    client: AsyncClient, event_log: EventLog, ledger: Ledger
) -> None:
    await client.apply_accounts({"lab": {}, "lab/team": {}})
    submitted = await event_log.append(b.submitted("j1"))  # account lab/team, pending
    async with asyncio.timeout(10):
        while ledger.state.seq < submitted.seq:
            await asyncio.sleep(0.01)
    before = await event_log.last_seq()
    with pytest.raises(CommandError) as refused:
        await client.apply_accounts({"lab": {}})
    assert [e.field for e in refused.value.errors] == ["accounts.lab/team"]
    assert await event_log.last_seq() == before
