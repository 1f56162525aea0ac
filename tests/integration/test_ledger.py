"""The ledger service object against a real NATS server, reached through the client."""

import asyncio
import time
import tomllib
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest

from allot.bus import EmbeddedNats, EventLog
from allot.client import AsyncClient, CommandError
from allot.proto.commands import BudgetGrantRequest
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


async def test_a_budget_is_granted_and_announced_when_used_up(
    nats_server: EmbeddedNats, event_log: EventLog
) -> None:
    ledger = Ledger(event_log, accounting_interval_s=0.2)
    running = asyncio.create_task(ledger.run())
    try:
        async with await AsyncClient.connect(nats_server.url) as c:
            await c.ready(timeout=10, services=("ledger",))
            with pytest.raises(CommandError, match="either --gpu-hours or --share"):
                await c.grant_budget(BudgetGrantRequest(account="lab/team"))
            assert await event_log.last_seq() == 0
            reply = await c.grant_budget(
                BudgetGrantRequest(account="lab/team", gpu_hours=0.001, period="7d")
            )
            assert reply.gpu_ms == 3600
            # A one-GPU job running on the log's clock for a few seconds uses it up.
            await event_log.append(b.node("n1", 1))
            await event_log.append(b.submitted("j1"))
            await event_log.append(b.plan(("j1", "n1", [0])))
            started = b.started("j1", "n1", [0])
            now = time.time_ns()
            await event_log.append(
                msgspec.structs.replace(
                    started, meta=msgspec.structs.replace(started.meta, at=now - 5 * 10**9)
                )
            )
            async with asyncio.timeout(10):
                while True:
                    kinds = [r.type for r in await event_log.read()]
                    if "BudgetExhausted" in kinds:
                        break
                    await asyncio.sleep(0.1)
            assert kinds.count("BudgetExhausted") == 1
            assert kinds.index("UsageCharged") < kinds.index("BudgetExhausted")
    finally:
        running.cancel()
