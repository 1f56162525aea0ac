"""Submissions asked of one client while its earlier ones are on their way go together, in
one ``submit_many`` request (docs/adr/0036): the client's side of the intake's group
commit. One submission with nothing on its way is sent at once, alone, as it always was."""

import asyncio
from collections.abc import Awaitable, Callable

from allot.proto.commands import SubmitReply
from allot.proto.limits import MAX_BATCH_JOBS, MAX_REQUEST_BYTES

MAX_SENDING = 2  # requests of submissions on their way at once: the next one gathers
# Of a request's bytes, what the submissions may take: the list around them needs a little.
ROOM = MAX_REQUEST_BYTES - 1024

SendOne = Callable[[bytes], Awaitable[SubmitReply]]
SendMany = Callable[[list[bytes]], Awaitable[list[SubmitReply]]]
Waiting = tuple[bytes, "asyncio.Future[SubmitReply]"]


class Together:
    """Sends each submission (a ``SubmitRequest`` as JSON) alone while fewer than
    ``MAX_SENDING`` requests are on their way, and those that wait for one together."""

    def __init__(self, send_one: SendOne, send_many: SendMany):
        self._send_one = send_one
        self._send_many = send_many
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
        batch: list[Waiting] = []
        size = 0
        while self._waiting and len(batch) < MAX_BATCH_JOBS:
            payload, future = self._waiting[0]
            if batch and size + len(payload) + 1 > ROOM:
                break
            del self._waiting[0]
            if not future.done():  # one given up on is not sent
                batch.append((payload, future))
                size += len(payload) + 1
        if not batch:
            return
        self._sending += 1
        task = asyncio.create_task(self._send(batch))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, batch: list[Waiting]) -> None:
        try:
            payloads = [payload for payload, _ in batch]
            if len(batch) == 1:
                replies = [await self._send_one(payloads[0])]
            else:
                replies = await self._send_many(payloads)
        except asyncio.CancelledError:
            for _, future in batch:
                future.cancel()
            raise
        except Exception as error:
            for _, future in batch:
                if not future.done():
                    future.set_exception(error)
                    future.exception()  # whoever waits is told; nobody else need be
        else:
            for (_, future), reply in zip(batch, replies, strict=True):
                if not future.done():
                    future.set_result(reply)
        finally:
            self._sent()
