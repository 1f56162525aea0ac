"""Request/reply on ``allot.cmd.accounts.apply`` and ``allot.cmd.budget.grant``; usage
charging and used-up budgets.

Commands are handled one at a time (``allot.services.commands``), each against a state that
has folded everything the ledger appended before, so two applies in a row never work from
the same old tree. An apply is one ``AccountsApplied`` event (docs/adr/0013): a file with
any problem is refused whole and appends nothing, and one that is accepted changes the tree
all at once.

Charging follows ``allot.core.charging``: whenever the log has been read, and on a timer,
the ledger appends ``UsageCharged`` for what is due. The fold ignores a charge that does
not start where the last one ended, so retries and restarts never charge twice; and the
ledger computes no charges while its last ones are still unfolded, so it does not append
again what it has just appended.
"""

import argparse
import asyncio
import logging

import msgspec

from allot.bus.eventlog import EventLog
from allot.core import State
from allot.core.accounts import AccountChange, changes_to_apply, read_tree
from allot.core.budgets import exhausted_now, read_grant
from allot.core.charging import charges_due
from allot.proto import msgids
from allot.proto.commands import (
    AccountsApplyReply,
    AccountsApplyRequest,
    BudgetGrantReply,
    BudgetGrantRequest,
    FieldError,
)
from allot.proto.events import (
    AccountEvent,
    AccountsApplied,
    AccountSettings,
    BudgetExhausted,
    BudgetGranted,
    UsageCharged,
)
from allot.proto.limits import EVENT_HEADROOM_BYTES, MAX_EVENT_BYTES
from allot.proto.subjects import ACCOUNTS_APPLY, BUDGET_GRANT
from allot.services.commands import Commands, Lane
from allot.services.replies import Sender, decode_request, not_stored
from allot.services.runtime import Clock, Folded, follow_state, stamp

log = logging.getLogger("allot.ledger")
MAX_APPLY_BYTES = MAX_EVENT_BYTES - EVENT_HEADROOM_BYTES


class Ledger:
    def __init__(
        self,
        events: EventLog,
        accounting_interval_s: float = 60.0,
        clock: Clock | None = None,
    ):
        self.events = events
        self.interval_ns = int(accounting_interval_s * 1e9)
        self.clock = clock or Clock()
        self.state = State()
        self.commands = Commands("ledger", self.clock)
        one_at_a_time = Lane()
        self.commands.answer(ACCOUNTS_APPLY, self.apply, one_at_a_time)
        self.commands.answer(BUDGET_GRANT, self.grant, one_at_a_time)
        self._folded = Folded(self.state)
        self._charging = asyncio.Lock()
        self._charged_seq = 0  # the last charge (or used-up budget) this ledger appended

    async def run(self) -> None:
        try:
            await asyncio.gather(
                follow_state(self.events, self.state, self._on_caught_up, snapshot=True),
                self._charge_on_time(),
            )
        finally:
            await self.commands.close()

    async def _charge_on_time(self) -> None:
        while True:
            await asyncio.sleep(min(1.0, self.interval_ns / 4e9))
            if self.commands.serving:  # the log has been read
                await self.charge()

    async def charge(self) -> None:
        """Append every charge that is due now."""
        async with self._charging:
            if self.state.seq < self._charged_seq:
                return  # charges computed now would repeat those not yet folded
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
                msg_id = msgids.usage_charge(due.job_id, due.attempt, due.from_ns, due.to_ns)
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
                if not await self._append_due(
                    exhausted, msgids.budget_exhausted(path, grant, period)
                ):
                    return
                log.info("budget of %s used up for period %d", path, period)

    async def _append_due(self, event: AccountEvent, msg_id: str) -> bool:
        try:
            appended = await self.events.append(event, msg_id=msg_id)
        except Exception as error:  # still due on the next round
            log.warning("%s not stored: %s", msg_id, error)
            return False
        self._charged_seq = max(self._charged_seq, appended.seq)
        return True

    async def grant(self, payload: bytes, sender: Sender) -> BudgetGrantReply:
        request = decode_request(payload, BudgetGrantRequest)
        if isinstance(request, FieldError):
            return BudgetGrantReply(errors=[request])
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
            by=sender.principal,
        )
        try:
            appended = await self.events.append(event)
        except Exception as error:
            return BudgetGrantReply(account=request.account, errors=[not_stored(error)])
        if refused := await self._refused(appended.seq, "budget"):
            return BudgetGrantReply(account=request.account, errors=[refused])
        return BudgetGrantReply(
            account=request.account, gpu_ms=gpu_ms, period_ns=period_ns, seq=appended.seq
        )

    async def _on_caught_up(self) -> None:
        await self._folded.announce()
        await self.charge()
        await self.commands.serve(self.events.nc, self.state.seq)

    async def apply(self, payload: bytes, sender: Sender) -> AccountsApplyReply:
        request = decode_request(payload, AccountsApplyRequest)
        if isinstance(request, FieldError):
            return AccountsApplyReply(errors=[request])
        tree, errors = read_tree(request.accounts)
        if errors:
            return AccountsApplyReply(errors=errors)
        changes, errors = changes_to_apply(self.state, tree)
        if errors:
            return AccountsApplyReply(errors=errors)
        done = AccountsApplyReply(
            defined=[c.path for c in changes if c.kind == "define"],
            updated=[c.path for c in changes if c.kind == "update"],
            removed=[c.path for c in changes if c.kind == "remove"],
        )
        if not changes:
            return done
        event = self._applied(changes, sender.principal)
        size = len(msgspec.json.encode(event))
        if size > MAX_APPLY_BYTES:
            return AccountsApplyReply(
                errors=[
                    FieldError(
                        field="accounts",
                        value=f"{len(changes)} changes, {size} bytes",
                        message=f"one apply is one event of at most {MAX_APPLY_BYTES} bytes:"
                        " apply the tree in steps",
                    )
                ]
            )
        try:
            appended = await self.events.append(event, msg_id=msgids.accounts_apply(event))
        except Exception as error:  # nothing changed: the apply is one event
            return AccountsApplyReply(errors=[not_stored(error)])
        if refused := await self._refused(appended.seq, "accounts"):
            return AccountsApplyReply(errors=[refused])
        return done

    def _applied(self, changes: list[AccountChange], by: str) -> AccountsApplied:
        defined: dict[str, AccountSettings] = {}
        updated: dict[str, AccountSettings] = {}
        for change in changes:
            if change.settings is not None:
                (defined if change.kind == "define" else updated)[change.path] = change.settings
        return AccountsApplied(
            meta=stamp("ledger", self.clock),
            defined=defined,
            updated=updated,
            removed=[c.path for c in changes if c.kind == "remove"],
            basis_seq=self.state.seq,
            by=by,
        )

    async def _refused(self, seq: int, field: str) -> FieldError | None:
        """Once ``seq`` is folded: why the fold refused it, if it did (another ledger's
        change came first)."""
        await self._folded.reached(seq)
        for ignored in reversed(self.state.ignored):
            if ignored.seq == seq:
                return FieldError(
                    field=field, value="", message=f"the log refused it: {ignored.reason}"
                )
            if ignored.seq < seq:
                break
        return None


async def serve(args: argparse.Namespace, events: EventLog) -> None:
    await Ledger(events, accounting_interval_s=args.accounting_interval).run()
