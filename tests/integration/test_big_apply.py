"""A big account tree does not stall scheduling: the ledger writes an apply as one event,
and the planner plans once per batch of events it has received, not once per event."""

import asyncio
import time

from allot.bus import EmbeddedNats, EventLog
from allot.client import AsyncClient
from allot.core import JobStatus
from allot.proto.events import AccountDefined, AccountSettings
from allot.services.ledger.app import Ledger
from allot.services.planner.app import Planner
from tests import builders as b
from tests.aio import background

ACCOUNTS = 5_000


class CountingPlanner(Planner):
    """A planner that counts its planning cycles (plans appended or not)."""

    cycles = 0

    async def plan_once(self) -> None:
        self.cycles += 1
        await super().plan_once()


async def until(condition: object, timeout: float) -> None:
    async with asyncio.timeout(timeout):
        while not condition():  # type: ignore[operator]
            await asyncio.sleep(0.02)


async def test_a_job_submitted_during_a_5000_account_apply_is_admitted_at_once(
    nats_server: EmbeddedNats, event_log: EventLog
) -> None:
    await event_log.append(b.node("n1", 8))
    ledger, planner = Ledger(event_log), CountingPlanner(event_log)
    tree: dict[str, dict[str, object]] = {"lab": {}, "lab/team": {}}
    tree |= {f"lab/t{i:04d}": {"weight": 1 + i % 3} for i in range(ACCOUNTS - len(tree))}
    async with (
        background(ledger.run(), planner.run()),
        await AsyncClient.connect(nats_server.url) as client,
    ):
        await client.ready(timeout=10, services=("ledger",))
        await client.apply_accounts({"lab": {}, "lab/team": {}})
        started = time.monotonic()
        applying = asyncio.create_task(client.apply_accounts(tree, timeout=120))
        await asyncio.sleep(0.2)  # the ledger is at it
        await event_log.append(b.submitted("j1"))
        submitted = time.monotonic()
        await until(lambda: "j1" in planner.state.jobs, timeout=30)
        await until(lambda: planner.state.jobs["j1"].status == JobStatus.ADMITTED, timeout=30)
        admitted = time.monotonic()
        reply = await applying
        applied = time.monotonic()
    assert len(reply.defined) == ACCOUNTS - 2
    events = await event_log.last_seq()
    print(
        f"apply of {ACCOUNTS} accounts: {applied - started:.2f} s, {events} events in the log;"
        f" job admitted {admitted - submitted:.2f} s after submission;"
        f" {planner.cycles} planning cycles"
    )
    assert admitted - submitted < 5
    assert planner.cycles < 50


async def test_the_planner_folds_what_has_arrived_before_it_plans_again(
    event_log: EventLog,
) -> None:
    """Events appended faster than the planner plans are folded in batches: it plans on
    what it has received, not once for every event of it."""
    await event_log.append(b.node("n1", 8))
    await event_log.append(AccountDefined(meta=b.meta(), path="lab", settings=AccountSettings()))
    await event_log.append(
        AccountDefined(meta=b.meta(), path="lab/team", settings=AccountSettings())
    )
    # A job that cannot be placed: every cycle ranks the accounts to say why it waits.
    await event_log.append(b.submitted("too-big", gpus=16))
    planner = CountingPlanner(event_log)
    async with background(planner.run()):
        await until(lambda: planner.state.jobs.get("too-big") is not None, timeout=10)
        before = planner.cycles
        defined = [
            AccountDefined(meta=b.meta(), path=f"lab/t{i:04d}", settings=AccountSettings())
            for i in range(ACCOUNTS)
        ]
        for chunk in range(0, ACCOUNTS, 500):
            await asyncio.gather(*(event_log.append(e) for e in defined[chunk : chunk + 500]))
        last = await event_log.last_seq()
        await until(lambda: planner.state.seq >= last, timeout=60)
        cycles = planner.cycles - before
    print(f"{ACCOUNTS} events folded in {cycles} planning cycles")
    assert cycles < ACCOUNTS / 20
