"""Request/reply on ``allot.cmd.accounts.apply`` and ``allot.cmd.budget.grant``; usage
charging and used-up budgets.

Commands are handled one at a time, each against a state that has folded everything the
ledger appended before, so two applies in a row never work from the same old tree. A file
with any problem is refused whole and appends nothing.

Charging follows ``allot.core.charging``: whenever the log has been read, and on a timer,
the ledger appends ``UsageCharged`` for what is due. The fold ignores a charge that does
not start where the last one ended, so retries and restarts never charge twice.
"""

import argparse
import asyncio
import hashlib
import logging

import msgspec
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from allot.bus.eventlog import EventLog
from allot.core import State
from allot.core.accounts import AccountChange, changes_to_apply, read_tree
from allot.core.budgets import exhausted_now, read_grant
from allot.core.charging import charges_due
from allot.proto.commands import (
    AccountsApplyReply,
    AccountsApplyRequest,
    BudgetGrantReply,
    BudgetGrantRequest,
)
from allot.proto.events import (
    AccountDefined,
    AccountEvent,
    AccountRemoved,
    AccountUpdated,
    BudgetExhausted,
    BudgetGranted,
    UsageCharged,
)
from allot.proto.subjects import ACCOUNTS_APPLY, BUDGET_GRANT, health
from allot.services.replies import decode_error, not_stored
from allot.services.runtime import Clock, follow_state, stamp

log = logging.getLogger("allot.ledger")


class Ledger:
    def __init__(
        self, events: EventLog, accounting_interval_s: float = 60.0, clock: Clock | None = None
    ):
        self.events = events
        self.interval_ns = int(accounting_interval_s * 1e9)
        self.clock = clock or Clock()
        self.state = State()
        self._subscriptions: list[Subscription] = []
        self._folded = asyncio.Condition()
        self._charging = asyncio.Lock()

    async def run(self) -> None:
        await asyncio.gather(
            follow_state(self.events, self.state, self._on_caught_up), self._charge_on_time()
        )

    async def _charge_on_time(self) -> None:
        while True:
            await asyncio.sleep(min(1.0, self.interval_ns / 4e9))
            if self._subscriptions:  # the log has been read
                await self.charge()

    async def charge(self) -> None:
        """Append every charge that is due now."""
        async with self._charging:
            for due in charges_due(self.state, self.clock.now(), self.interval_ns):
                event = UsageCharged(
                    meta=stamp("ledger", self.clock),
                    path=due.account,
                    job_id=due.job_id,
                    attempt=due.attempt,
                    from_ns=due.from_ns,
                    to_ns=due.to_ns,
                    gpu_ms=due.gpu_ms,
                )
                # The end is part of the id: a charge the fold refused (it ran past an exit
                # not yet folded) must not block the right one as a duplicate.
                msg_id = f"usage:{due.job_id}:{due.attempt}:{due.from_ns}:{due.to_ns}"
                if not await self._append_due(event, msg_id):
                    return
            for path, period, used, budget in exhausted_now(self.state, self.clock.now()):
                exhausted = BudgetExhausted(
                    meta=stamp("ledger", self.clock),
                    path=path,
                    period=period,
                    used_gpu_ms=used,
                    budget_gpu_ms=budget,
                )
                grant = self.state.budgets[path].starts_at
                if not await self._append_due(exhausted, f"exhausted:{path}:{grant}:{period}"):
                    return
                log.info("budget of %s used up for period %d", path, period)

    async def _append_due(self, event: AccountEvent, msg_id: str) -> bool:
        try:
            await self.events.append(event, msg_id=msg_id)
        except Exception as error:  # still due on the next round
            log.warning("%s not stored: %s", msg_id, error)
            return False
        return True

    async def grant(self, payload: bytes) -> BudgetGrantReply:
        try:
            request = msgspec.json.decode(payload, type=BudgetGrantRequest)
        except msgspec.DecodeError as error:
            return BudgetGrantReply(errors=[decode_error(error)])
        grant, errors = read_grant(request, self.state)
        if grant is None:
            return BudgetGrantReply(account=request.account, errors=errors)
        gpu_ms, period_ns, share_ppm = grant
        event = BudgetGranted(
            meta=stamp("ledger", self.clock),
            path=request.account,
            gpu_ms=gpu_ms,
            period_ns=period_ns,
            starts_at=self.clock.now(),
            share_ppm=share_ppm,
        )
        try:
            appended = await self.events.append(event)
        except Exception as error:
            return BudgetGrantReply(account=request.account, errors=[not_stored(error)])
        await self._until_folded(appended.seq)
        return BudgetGrantReply(
            account=request.account, gpu_ms=gpu_ms, period_ns=period_ns, seq=appended.seq
        )

    async def _on_caught_up(self) -> None:
        async with self._folded:
            self._folded.notify_all()
        await self.charge()
        if self._subscriptions:
            return
        nc = self.events.nc
        self._subscriptions = [
            await nc.subscribe(ACCOUNTS_APPLY, queue="ledger", cb=self._on_apply),
            await nc.subscribe(BUDGET_GRANT, queue="ledger", cb=self._on_grant),
            await nc.subscribe(health("ledger"), queue="ledger", cb=self._on_health),
        ]
        log.info("caught up at sequence %d, accepting commands", self.state.seq)

    async def _on_health(self, msg: Msg) -> None:
        await msg.respond(b'{"ok":true}')

    async def _on_apply(self, msg: Msg) -> None:
        reply = await self.apply(msg.data)
        await msg.respond(msgspec.json.encode(reply))

    async def _on_grant(self, msg: Msg) -> None:
        reply = await self.grant(msg.data)
        await msg.respond(msgspec.json.encode(reply))

    async def apply(self, payload: bytes) -> AccountsApplyReply:
        try:
            request = msgspec.json.decode(payload, type=AccountsApplyRequest)
        except msgspec.DecodeError as error:
            return AccountsApplyReply(errors=[decode_error(error)])
        tree, errors = read_tree(request.accounts)
        if errors:
            return AccountsApplyReply(errors=errors)
        changes, errors = changes_to_apply(self.state, tree)
        if errors:
            return AccountsApplyReply(errors=errors)
        last = 0
        try:
            for change in changes:
                appended = await self.events.append(
                    self._event(change), msg_id=_change_id(self.state.seq, change)
                )
                last = appended.seq
        except Exception as error:  # a retry applies the rest: applying is declarative
            log.warning("apply stopped after sequence %d: %s", last, error)
            return AccountsApplyReply(errors=[not_stored(error)])
        await self._until_folded(last)
        return AccountsApplyReply(
            defined=[c.path for c in changes if c.kind == "define"],
            updated=[c.path for c in changes if c.kind == "update"],
            removed=[c.path for c in changes if c.kind == "remove"],
        )

    def _event(self, change: AccountChange) -> AccountEvent:
        meta = stamp("ledger", self.clock)
        if change.kind == "remove":
            return AccountRemoved(meta=meta, path=change.path)
        assert change.settings is not None
        if change.kind == "define":
            return AccountDefined(meta=meta, path=change.path, settings=change.settings)
        return AccountUpdated(meta=meta, path=change.path, settings=change.settings)

    async def _until_folded(self, seq: int) -> None:
        async with self._folded:
            await self._folded.wait_for(lambda: self.state.seq >= seq)


def _change_id(basis: int, change: AccountChange) -> str:
    """The same change computed from the same log position is one message."""
    body = msgspec.json.encode(change)
    return f"account:{basis}:{hashlib.blake2b(body, digest_size=12).hexdigest()}"


async def serve(args: argparse.Namespace, events: EventLog) -> None:
    await Ledger(events, accounting_interval_s=args.accounting_interval).run()
