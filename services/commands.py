"""Requests answered one at a time, within bounds: what stands between NATS and the
handlers of a command service.

NATS hands a subscriber each request as it arrives and keeps the ones not yet handled in
memory, thousands deep; a service that answers one at a time then works, long after, on
requests whose clients gave up. Here requests wait in a queue of bounded length (one that
finds it full is told so at once), one that waited longer than its client would have is
answered without being handled, and a handler that raises is answered with the error and
logged: every request gets one reply, and no request stops the service.
"""

import asyncio
from collections.abc import Mapping

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from allot.proto.subjects import from_anyone, sender_and_command
from allot.services.replies import Handler, Refusal, answer, refusal, respond
from allot.services.runtime import Clock

MAX_WAITING = 64  # requests; each is at most MAX_REQUEST_BYTES
MAX_WAIT_S = 10.0  # the client's default timeout: a reply after it reaches nobody


class CommandQueue:
    """Requests on the subjects routed here, handled in arrival order by ``serve``."""

    def __init__(
        self,
        service: str,
        clock: Clock,
        max_waiting: int = MAX_WAITING,
        max_wait_s: float = MAX_WAIT_S,
    ):
        self.service = service
        self.clock = clock
        self.max_wait_s = max_wait_s
        self._handlers: dict[str, Handler] = {}
        self._waiting: asyncio.Queue[tuple[Msg, float]] = asyncio.Queue(max_waiting)

    async def subscribe(self, nc: NATS, handlers: Mapping[str, Handler]) -> list[Subscription]:
        """Take each command of ``handlers`` (by its name: ``admin.budget.grant``), whoever
        sends it (the service's instances share them, each request going to one)."""
        self._handlers |= handlers
        return [
            await nc.subscribe(from_anyone(name), queue=self.service, cb=self._arrived)
            for name in handlers
        ]

    async def serve(self) -> None:
        while True:
            msg, arrived = await self._waiting.get()
            waited_s = self.clock.monotonic() - arrived
            if waited_s > self.max_wait_s:
                await respond(msg, _given_up(waited_s))
            else:
                _, name = sender_and_command(msg.subject) or ("", "")
                await answer(msg, self._handlers[name], self.service)

    async def _arrived(self, msg: Msg) -> None:
        try:
            self._waiting.put_nowait((msg, self.clock.monotonic()))
        except asyncio.QueueFull:
            busy = f"{self._waiting.qsize()} requests are waiting; retry in a moment"
            await respond(msg, refusal("request", "", f"the {self.service} is busy: {busy}"))


def _given_up(waited_s: float) -> Refusal:
    return refusal(
        "request",
        f"waited {waited_s:.0f} s",
        f"not handled: its client has given up waiting by now (after {MAX_WAIT_S:.0f} s"
        " by default); send it again",
    )
