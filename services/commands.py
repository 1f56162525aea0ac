"""The one runtime of the services that answer commands (the intake and the ledger): a
subscription for each command subject, answered within bounds, and the declarations the
AsyncAPI document of the subjects is made from.

NATS hands a subscriber each request as it arrives and keeps the ones not yet handled in
memory, thousands deep; a service that answers one at a time then works, long after, on
requests whose clients gave up. Here a request waits its turn in a ``Lane`` of bounded
length (one that finds it full is told so at once), one that waited longer than its client
would have is answered without being handled, and a handler that raises is answered with
the error and logged: every request gets one reply, and no request stops the service. A
request whose reply subject is not its sender's own is dropped unanswered
(``allot.services.replies.sender_of``).

Each command is declared on a FastStream router as well, which is what FastStream's AsyncAPI
generator reads (``allot.services.asyncapi``). The requests themselves are taken by nats-py
subscriptions on the service's own connection: FastStream's handling of a message costs
about a millisecond of CPU, which cut the intake from ~850 to ~150 submissions/s
(docs/adr/0001).
"""

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable

import msgspec
from faststream.nats import NatsRouter
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from allot.bus import tracing
from allot.proto.commands import CONTRACTS, Contract, FieldError, SubmitReply, SubmitRequest
from allot.proto.events import JobSpec
from allot.proto.queries import QUERIES
from allot.proto.subjects import COMMANDS_PREFIX, from_anyone, health
from allot.services.replies import (
    Handler,
    Refusal,
    Sender,
    answer,
    refusal,
    request_of,
    respond,
)
from allot.services.runtime import Clock
from allot.services.stats import REFUSALS, REQUESTS, Counts

log = logging.getLogger("allot.commands")
MAX_WAITING = 64  # requests; each is at most MAX_REQUEST_BYTES
MAX_WAIT_S = 10.0  # the client's default timeout: a reply after it reaches nobody


class Lane:
    """Requests handled ``at_once`` at a time, in the order they arrived; at most
    ``max_waiting`` more wait their turn. Commands that must not overlap share one."""

    def __init__(self, at_once: int = 1, max_waiting: int = MAX_WAITING):
        self.at_once = at_once
        self.max_waiting = max_waiting
        self.waiting = 0
        self._turns = asyncio.Semaphore(at_once)  # wakes waiters first come, first served

    def admit(self) -> bool:
        """Count a request in as waiting, as it arrives; False if the lane is full."""
        if self.waiting >= self.max_waiting:
            return False
        self.waiting += 1
        return True

    @contextlib.asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """Wait for an admitted request's turn, then hold it."""
        try:
            await self._turns.acquire()
        finally:
            self.waiting -= 1
        try:
            yield
        finally:
            self._turns.release()


class Commands:
    """The commands one service answers. Declared up front (``answer``), so the AsyncAPI
    document can list them without a connection; served once ``serve`` is called, which
    the service does when it has read the log."""

    def __init__(self, service: str, clock: Clock | None = None, max_wait_s: float = MAX_WAIT_S):
        self.service = service
        self.clock = clock or Clock()
        self.max_wait_s = max_wait_s
        self.router = NatsRouter()  # what the AsyncAPI document says of these commands
        self._handlers: dict[str, tuple[Handler, Lane]] = {}
        self._subscriptions: list[Subscription] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self.counts = Counts(service)  # requests and their outcomes, for the metrics

    def answer(self, name: str, handler: Handler, lane: Lane) -> None:
        """Answer the command ``name`` (``CONTRACTS``) with ``handler``, in ``lane``, for
        whoever sends it; the service's instances share the requests, each going to one."""
        contract = contract_of(name)
        self._handlers[name] = (handler, lane)
        self.router.subscriber(
            f"{COMMANDS_PREFIX}.{{principal}}.{name}",  # documents the parameter
            queue=self.service,
            title=name,
            description=f"{contract.summary}. Request: {contract.request.__name__}; "
            f"reply: {contract.reply.__name__}.",
        )(_declared)

    async def serve(self, nc: NATS, caught_up_at: int) -> None:
        """Start answering on ``nc``, and answer health checks; once, when the service
        has first caught up with the log (at ``caught_up_at``)."""
        if self._subscriptions:
            return
        log.info("%s caught up at sequence %d, accepting commands", self.service, caught_up_at)
        for name, (handler, lane) in self._handlers.items():
            self._subscriptions.append(
                await nc.subscribe(
                    from_anyone(name), queue=self.service, cb=self._arrival(name, handler, lane)
                )
            )
        self._subscriptions.append(
            await nc.subscribe(health(self.service), queue=self.service, cb=_healthy)
        )
        sending = asyncio.create_task(self.counts.send_every(nc))
        self._tasks.add(sending)
        sending.add_done_callback(self._tasks.discard)

    @property
    def serving(self) -> bool:
        return bool(self._subscriptions)

    async def close(self) -> None:
        subscriptions, self._subscriptions = self._subscriptions, []
        for subscription in subscriptions:
            with contextlib.suppress(Exception):  # the connection may be gone already
                await subscription.unsubscribe()
        for task in list(self._tasks):
            task.cancel()

    def _arrival(self, name: str, handler: Handler, lane: Lane) -> Callable[[Msg], Awaitable[None]]:
        async def arrived(msg: Msg) -> None:
            # nats-py hands a subscription's messages over one by one: each is taken in
            # its own task, which waits for its turn in the lane. What is no request takes
            # no room in it (a flood of them aimed at a command subject is cheap to send).
            sender = request_of(msg)
            if sender is None:
                self.counts.add(REQUESTS, service=self.service, command=name, outcome="dropped")
                return
            if not lane.admit():
                self.counts.add(REQUESTS, service=self.service, command=name, outcome="busy")
                busy = f"{lane.waiting} requests are waiting; retry in a moment"
                await respond(msg, refusal("request", "", f"the {self.service} is busy: {busy}"))
                return
            task = asyncio.create_task(self._take(name, msg, sender, handler, lane))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

        return arrived

    async def _take(
        self, name: str, msg: Msg, sender: Sender, handler: Handler, lane: Lane
    ) -> None:
        arrived = self.clock.monotonic()
        with tracing.request_span(f"{self.service}.{name}", msg.headers):
            async with lane.turn():
                waited_s = self.clock.monotonic() - arrived
                if waited_s > self.max_wait_s:
                    await respond(msg, _given_up(waited_s))
                    self.counts.add(
                        REQUESTS, service=self.service, command=name, outcome="given_up"
                    )
                else:
                    reply = await answer(msg, sender, handler, self.service)
                    self._count(name, reply)

    def _count(self, name: str, reply: msgspec.Struct) -> None:
        entries: list[SubmitReply] = getattr(reply, "replies", [])
        if entries:  # a request of several submissions: each counted as if sent alone
            for entry in entries:
                self._count_one(name, entry, SubmitRequest)
        else:
            self._count_one(name, reply, contract_of(name).request)

    def _count_one(self, name: str, reply: msgspec.Struct, request: type[msgspec.Struct]) -> None:
        errors: list[FieldError] = getattr(reply, "errors", [])
        outcome = (
            "refused"
            if errors
            else "duplicate"
            if getattr(reply, "duplicate", False)
            else "accepted"
        )
        self.counts.add(REQUESTS, service=self.service, command=name, outcome=outcome)
        if errors:
            field = refused_field(errors[0].field, request)
            self.counts.add(REFUSALS, service=self.service, command=name, field=field)


def contract_of(name: str) -> Contract:
    """The contract of a command or a query, by its name in the subject."""
    return CONTRACTS[name] if name in CONTRACTS else QUERIES[name]


async def _declared(body: bytes) -> None:
    """What the router's declarations call: nothing, as they only describe the commands."""


async def _healthy(msg: Msg) -> None:
    await msg.respond(b'{"ok":true}')


def refused_field(field: str, request: type[msgspec.Struct]) -> str:
    """The field a refusal names, as a label: the deepest part of its path that is a field
    of the request or of a job spec, else ``other`` (the path may be the sender's own
    misspelling, and labels must come from a small set)."""
    known = {"request", *request.__struct_fields__, *JobSpec.__struct_fields__}
    parts = [part for part in re.split(r"[.\[\]]", field) if part in known]
    return parts[-1] if parts else "other"


def _given_up(waited_s: float) -> Refusal:
    return refusal(
        "request",
        f"waited {waited_s:.0f} s",
        f"not handled: its client has given up waiting by now (after {MAX_WAIT_S:.0f} s"
        " by default); send it again",
    )
