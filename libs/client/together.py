"""Submissions asked of one client while its earlier ones are on their way go together, in
one ``submit_many`` request (docs/adr/0036): the client's side of the intake's group
commit. One submission with nothing on its way is sent at once, alone, as it always was."""

import asyncio
from collections.abc import Awaitable, Callable

from allot.proto.commands import SubmitReply
from allot.proto.limits import MAX_BATCH_JOBS

MAX_SENDING = 2  # requests of submissions on their way at once: the next one gathers
LIST_BYTES = 1024  # what a request's list around the submissions may take, at most

SendOne = Callable[[bytes], Awaitable[SubmitReply]]
# The replies to submissions sent in one request, in order; None: send each alone instead.
SendMany = Callable[[list[bytes]], Awaitable[list[SubmitReply] | None]]
Waiting = tuple[bytes, "asyncio.Future[SubmitReply]"]


class Together:
    """Sends each submission (a ``SubmitRequest`` as JSON) alone while fewer than
    ``MAX_SENDING`` requests are on their way, and those that wait for one together, in
    requests of at most ``room()`` bytes. A submission whose reply says to send it again
    (``again``) is sent again alone, as one sent alone would be; each caller is answered
    as soon as its own submission is."""

    def __init__(
        self,
        send_one: SendOne,
        send_many: SendMany,
        again: Callable[[SubmitReply], bool],
        room: Callable[[], int],
    ):
        self._send_one = send_one
        self._send_many = send_many
        self._again = again
        self._room = room
        self._sending = 0
        self._waiting: list[Waiting] = []
        self._tasks: set[asyncio.Task[None]] = set()

    async def submit(self, payload: bytes) -> SubmitReply:
        if self._sending < MAX_SENDING and not self._waiting:
            self._sending += 1
            try:
                return await self._send_one(payload)
            finally:
                self._sent()
        future: asyncio.Future[SubmitReply] = asyncio.get_running_loop().create_future()
        self._waiting.append((payload, future))
        return await future

    def _sent(self) -> None:
        """One request is back: the next one takes what waits."""
        self._sending -= 1
        if not self._waiting or self._sending >= MAX_SENDING:
            return
        room = self._room() - LIST_BYTES
        batch: list[Waiting] = []
        size = 0
        while self._waiting and len(batch) < MAX_BATCH_JOBS:
            payload, future = self._waiting[0]
            if batch and size + len(payload) + 1 > room:
                break
            del self._waiting[0]
            if not future.done():  # one given up on is not sent
                batch.append((payload, future))
                size += len(payload) + 1
        if batch:
            self._sending += 1
            self._start(self._send(batch))

    def _start(self, sending: Awaitable[None]) -> None:
        task = asyncio.ensure_future(sending)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, batch: list[Waiting]) -> None:
        try:
            if len(batch) == 1:
                await self._alone(*batch[0])
                return
            replies = await self._send_many([payload for payload, _ in batch])
        except asyncio.CancelledError:
            for _, future in batch:
                future.cancel()
            raise
        except Exception as error:
            for _, future in batch:
                _settle(future, error=error)
            return
        finally:
            self._sent()
        for n, (payload, future) in enumerate(batch):
            reply = None if replies is None else replies[n]
            if reply is None or self._again(reply):
                self._start(self._alone(payload, future))
            else:
                _settle(future, reply)

    async def _alone(self, payload: bytes, future: "asyncio.Future[SubmitReply]") -> None:
        try:
            reply = await self._send_one(payload)
        except asyncio.CancelledError:
            future.cancel()
            raise
        except Exception as error:
            _settle(future, error=error)
        else:
            _settle(future, reply)


def _settle(
    future: "asyncio.Future[SubmitReply]",
    reply: SubmitReply | None = None,
    error: Exception | None = None,
) -> None:
    if future.done():  # its caller gave up waiting
        return
    if error is not None:
        future.set_exception(error)
        future.exception()  # whoever waits is told; nobody else need be
    elif reply is not None:
        future.set_result(reply)
