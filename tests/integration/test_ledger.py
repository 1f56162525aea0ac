"""The ledger service object against a real NATS server, reached through the client."""

import asyncio
import time
import tomllib
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest

from allot.bus import EmbeddedNats, EventLog
from allot.client import AsyncClient, CommandError
from allot.core import State, apply_record
from allot.core.accounts import MAX_CHANGES
from allot.proto.commands import BudgetGrantRequest
from allot.proto.events import AccountsApplied, UsageCharged
from allot.proto.subjects import ACCOUNTS_APPLY, BUDGET_GRANT
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


async def applies(log: EventLog) -> list[AccountsApplied]:
    return [r.event for r in await log.read() if isinstance(r.event, AccountsApplied)]


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
    [applied] = await applies(event_log)  # the whole apply is one event
    assert list(applied.defined) == reply.defined
    state = await client.state()
    assert state.accounts["lab/vision/alice"].max_wait_ns == 2 * 3600 * 10**9

    again = await client.apply_accounts(tree)  # declarative: nothing to do
    assert (again.defined, again.updated, again.removed) == ([], [], [])
    assert len(await applies(event_log)) == 1


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
    reply = await client.apply_accounts({"lab": {"weight": 3}, "lab/a": {}, "lab/c": {}})
    assert (reply.defined, reply.updated, reply.removed) == (["lab/c"], ["lab"], ["lab/b"])
    state = await client.state()
    assert sorted(state.accounts) == ["lab", "lab/a", "lab/c"]
    assert state.accounts["lab"].weight == 3
    second = (await applies(event_log))[1]
    assert (list(second.defined), list(second.updated), second.removed) == (
        ["lab/c"],
        ["lab"],
        ["lab/b"],
    )


async def test_an_apply_that_would_not_fit_in_one_event_is_refused(
    client: AsyncClient, event_log: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree: dict[str, dict[str, object]] = {"lab": {}}
    tree |= {f"lab/t{i:05d}": {} for i in range(MAX_CHANGES)}  # one more than the limit
    with pytest.raises(CommandError) as refused:
        await client.apply_accounts(tree)
    [error] = refused.value.errors
    assert (error.field, error.value) == ("accounts", f"{MAX_CHANGES + 1} changes")
    assert str(MAX_CHANGES) in error.message
    # What decides is the event's size: the ledger measures it before appending it.
    monkeypatch.setattr("allot.services.ledger.app.MAX_APPLY_BYTES", 1_000)
    with pytest.raises(CommandError, match="at most 1000 bytes") as refused:
        await client.apply_accounts({"lab": {}} | {f"lab/t{i:03d}": {} for i in range(100)})
    assert refused.value.errors[0].value.startswith("101 changes, ")
    assert await event_log.last_seq() == 0


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


async def test_one_accounting_tick_appends_each_charge_once(event_log: EventLog) -> None:
    """109 jobs running: every tick charges each of them once, and the fold takes every
    charge (none is a repeat computed before the ledger had folded its own charges)."""
    jobs = [f"j{i}" for i in range(109)]
    for n in range(14):
        await event_log.append(b.node(f"n{n}", 8))
    for job in jobs:
        await event_log.append(b.submitted(job))
    await event_log.append(b.plan(*((job, f"n{i // 8}", [i % 8]) for i, job in enumerate(jobs))))
    long_ago = time.time_ns() - 5 * 10**9
    for i, job in enumerate(jobs):
        started = b.started(job, f"n{i // 8}", [i % 8])
        await event_log.append(
            msgspec.structs.replace(
                started, meta=msgspec.structs.replace(started.meta, at=long_ago)
            )
        )
    ledger = Ledger(event_log, accounting_interval_s=0.5)
    running = asyncio.create_task(ledger.run())
    try:
        await asyncio.sleep(2.5)  # a few ticks
    finally:
        running.cancel()
    state = State()
    records = await event_log.read()
    for record in records:
        apply_record(state, record)
    appended = sum(r.type == "UsageCharged" for r in records)
    folded = state.usage_version  # one for each charge the fold took
    assert (appended, folded) == (folded, folded)
    # Each tick charges each job once; the ledger may be stopped halfway through a tick.
    charges = Counter(r.event.job_id for r in records if isinstance(r.event, UsageCharged))
    assert set(charges) == set(jobs)
    assert max(charges.values()) - min(charges.values()) <= 1


DEEP = b'{"account":"lab","junk":' + b"[" * 1000 + b"]" * 1000 + b"}"
HUGE = b"9" * 30


def lab(settings: bytes) -> bytes:
    return b'{"accounts":{"lab":' + settings + b"}}"


@pytest.mark.parametrize(
    ("subject", "payload", "field", "words"),
    [
        (BUDGET_GRANT, b'{"account":"lab","gpu_hours":1e308}', "gpu_hours", "1e+308"),
        (BUDGET_GRANT, b'{"account":"lab","gpu_hours":18446744073709551616}', "gpu_hours", ""),
        (BUDGET_GRANT, b'{"account":"lab","gpu_hours":-1}', "gpu_hours", ""),
        (BUDGET_GRANT, b'{"account":"lab","share":1e308}', "share", ""),
        (BUDGET_GRANT, b'{"account":"lab","gpu_hours":1,"period":"99999999999d"}', "period", ""),
        (BUDGET_GRANT, DEEP, "request", "nested"),
        (ACCOUNTS_APPLY, b'{"accounts":' + DEEP + b"}", "request", "nested"),
        (ACCOUNTS_APPLY, lab(b'{"weight":1e400}'), None, "out of range"),
        (ACCOUNTS_APPLY, lab(b'{"weight":' + HUGE + b"}"), "accounts.lab.weight", "1 to"),
        (ACCOUNTS_APPLY, lab(b'{"quota":{"gpu":' + HUGE + b"}}"), "accounts.lab.quota.gpu", ""),
        (ACCOUNTS_APPLY, lab(b'{"max_wait":"99999999999d"}'), "accounts.lab.max_wait", "365d"),
        (ACCOUNTS_APPLY, b"[]", "request", ""),
    ],
)
async def test_a_request_out_of_bounds_gets_a_field_error_and_appends_nothing(
    nats_server: EmbeddedNats,
    client: AsyncClient,
    event_log: EventLog,
    subject: str,
    payload: bytes,
    field: str | None,
    words: str,
) -> None:
    await client.apply_accounts({"lab": {}})
    before = await event_log.last_seq()
    async with await AsyncClient.connect(nats_server.url) as raw:
        answer = await raw.events.nc.request(raw.subject(subject), payload, timeout=5)
        errors = msgspec.json.decode(answer.data)["errors"]
        assert [e["field"] for e in errors] == [field or errors[0]["field"]]
        assert words in errors[0]["value"] + errors[0]["message"]
        assert await event_log.last_seq() == before
        # ...and the ledger still answers.
        granted = await raw.grant_budget(BudgetGrantRequest(account="lab", gpu_hours=10))
        assert granted.gpu_ms == 10 * 3_600_000


async def test_a_handler_that_fails_still_replies_and_the_ledger_goes_on(
    client: AsyncClient, event_log: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr("allot.services.ledger.app.read_tree", broken)
    with pytest.raises(CommandError, match="a bug"):
        await client.apply_accounts({"lab": {}})
    assert await event_log.last_seq() == 0
    monkeypatch.undo()
    assert (await client.apply_accounts({"lab": {}})).defined == ["lab"]
