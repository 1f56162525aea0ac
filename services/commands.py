"""The one runtime of the services that answer commands (the intake and the ledger): a
FastStream subscriber for each command subject, answered within bounds.

NATS hands a subscriber each request as it arrives and keeps the ones not yet handled in
memory, thousands deep; a service that answers one at a time then works, long after, on
requests whose clients gave up. Here a request waits its turn in a ``Lane`` of bounded
length (one that finds it full is told so at once), one that waited longer than its client
would have is answered without being handled, and a handler that raises is answered with
the error and logged: every request gets one reply, and no request stops the service.

FastStream gives the subscriptions, their concurrency, the middleware the tracing and
metrics hook into, and the AsyncAPI document of the subjects (``allot.services.asyncapi``);
the log is still read and written through ``allot.bus.EventLog`` (docs/adr/0001). Replies
are sent here, not by FastStream: a request whose reply subject is not its sender's own is
dropped unanswered (``allot.services.replies.sender_of``).
"""

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from faststream.nats import NatsBroker, NatsMessage, NatsRouter
from faststream.nats.security import NatsNKey, NatsSecurity

from allot.bus import tracing
from allot.bus.eventlog import Connection
from allot.proto.commands import CONTRACTS
from allot.proto.subjects import COMMANDS_PREFIX, health, inbox_prefix
from allot.services.replies import Handler, Refusal, answer, refusal, respond
from allot.services.runtime import Clock

log = logging.getLogger("allot.commands")
MAX_WAITING = 64  # requests; each is at most MAX_REQUEST_BYTES
MAX_WAIT_S = 10.0  # the client's default timeout: a reply after it reaches nobody
_REFUSERS = 4  # requests beyond a full lane being refused at once; a refusal is quick


class Lane:
    """Requests handled ``at_once`` at a time, in the order they arrived; at most
    ``max_waiting`` more wait their turn. Commands that must not overlap share one."""

    def __init__(self, at_once: int = 1, max_waiting: int = MAX_WAITING):
        self.at_once = at_once
        self.max_waiting = max_waiting
        self.waiting = 0
        self._turns = asyncio.Semaphore(at_once)  # wakes waiters first come, first served

    @property
    def capacity(self) -> int:
        """Requests taken off the connection at once: those handled, those waiting, and a
        few more, so that one finding the lane full is told so at once, not after a turn."""
        return self.at_once + self.max_waiting + _REFUSERS

    @property
    def full(self) -> bool:
        return self.waiting >= self.max_waiting

    @contextlib.asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """Wait for this request's turn, then hold it."""
        self.waiting += 1
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
        self.router = NatsRouter()
        self._broker: NatsBroker | None = None
        self.router.subscriber(
            health(service),
            queue=service,
            no_reply=True,
            decoder=_raw,
            include_in_schema=False,
        )(self._healthy)

    def answer(self, name: str, handler: Handler, lane: Lane) -> None:
        """Answer the command ``name`` (``CONTRACTS``) with ``handler``, in ``lane``, for
        whoever sends it; the service's instances share the requests, each going to one."""
        contract = CONTRACTS[name]

        async def take(body: bytes, msg: NatsMessage) -> None:
            span = f"{self.service}.{name}"
            context = tracing.extract(msg.raw_message.headers)
            with tracing.tracer.start_as_current_span(span, context=context):
                await self._take(msg, handler, lane)

        self.router.subscriber(
            # FastStream subscribes to ``allot.cmd.*.<name>`` and documents the parameter.
            f"{COMMANDS_PREFIX}.{{principal}}.{name}",
            queue=self.service,
            max_workers=lane.capacity,
            no_reply=True,
            decoder=_raw,
            title=name,
            description=f"{contract.summary}. Request: {contract.request.__name__}; "
            f"reply: {contract.reply.__name__}.",
        )(take)

    async def serve(self, connection: Connection | None) -> None:
        """Start answering, on a connection of the service's identity; once."""
        if self._broker is not None:
            return
        if connection is None:
            raise RuntimeError("commands are served as the log was connected: use EventLog.connect")
        broker = broker_for(self.service, connection)
        broker.include_router(self.router)
        await broker.start()
        self._broker = broker

    @property
    def serving(self) -> bool:
        return self._broker is not None

    async def close(self) -> None:
        broker, self._broker = self._broker, None
        if broker is not None:
            await broker.stop()

    async def _take(self, msg: NatsMessage, handler: Handler, lane: Lane) -> None:
        raw = msg.raw_message
        if lane.full:
            busy = f"{lane.waiting} requests are waiting; retry in a moment"
            await respond(raw, refusal("request", "", f"the {self.service} is busy: {busy}"))
            return
        arrived = self.clock.monotonic()
        async with lane.turn():
            waited_s = self.clock.monotonic() - arrived
            if waited_s > self.max_wait_s:
                await respond(raw, _given_up(waited_s))
            else:
                await answer(raw, handler, self.service)

    async def _healthy(self, body: bytes, msg: NatsMessage) -> None:
        await msg.raw_message.respond(b'{"ok":true}')


def broker_for(service: str, connection: Connection) -> NatsBroker:
    """A FastStream broker that connects as ``connection`` says."""
    identity = connection.identity
    security: NatsSecurity | None
    if identity is not None:
        security = NatsNKey.from_seed(identity.seed, ssl_context=connection.tls)
    else:
        security = NatsSecurity(ssl_context=connection.tls) if connection.tls else None
    return NatsBroker(
        connection.url,
        name=f"allot-{service}-commands",
        inbox_prefix=inbox_prefix(identity.name if identity else service),
        security=security,
        max_reconnect_attempts=-1,
        reconnect_time_wait=1,
        logger=log,
        log_level=logging.DEBUG,  # a line per request is for debugging, not the service log
    )


async def _raw(msg: NatsMessage, original: Callable[..., Awaitable[object]] | None = None) -> bytes:
    """The request as it came: the handlers decode it with msgspec, within bounds."""
    return msg.body


def _given_up(waited_s: float) -> Refusal:
    return refusal(
        "request",
        f"waited {waited_s:.0f} s",
        f"not handled: its client has given up waiting by now (after {MAX_WAIT_S:.0f} s"
        " by default); send it again",
    )
