"""Group commit of submissions (docs/adr/0036): while one append is being stored, the
submissions that arrive wait, and are appended together, as one ``JobsSubmitted``, as soon
as it is. A submission that finds nothing being stored is appended at once, alone, as the
``JobSubmitted`` it always was: an idle stack adds no wait, and a busy one appends (and
every service reads and decodes) one event for many submissions.
"""

import asyncio
import contextvars
import logging

from allot.bus import tracing
from allot.bus.eventlog import Appended, EventLog, EventTooLarge
from allot.proto import msgids
from allot.proto.events import ArraySubmitted, JobsSubmitted, JobSubmitted, Submission
from allot.proto.limits import MAX_BATCH_JOBS
from allot.services.runtime import Clock, stamp

log = logging.getLogger("allot.intake")

Waiting = tuple[Submission, "asyncio.Future[Appended]"]


class GroupCommit:
    """Appends submissions, one event for those that arrived while the last was stored."""

    def __init__(self, events: EventLog, clock: Clock):
        self.events = events
        self.clock = clock
        self.appends = 0  # events appended: how many submissions went together
        self._waiting: list[Waiting] = []
        self._storing: asyncio.Task[None] | None = None

    def append(self, event: JobSubmitted | ArraySubmitted) -> "asyncio.Future[Appended]":
        """Store ``event`` (in a batch, maybe): the future of where it was stored, or of
        what the append raised. The trace context current here goes with it."""
        future: asyncio.Future[Appended] = asyncio.get_running_loop().create_future()
        self._waiting.append((Submission(event=event, trace=tracing.inject({})), future))
        if self._storing is None:
            # In a context of its own: what it appends carries the trace context each
            # submission brought, not that of the request that happened to start it.
            self._storing = asyncio.create_task(self._store(), context=contextvars.Context())
        return future

    async def close(self) -> None:
        if self._storing is not None:
            self._storing.cancel()
            await asyncio.gather(self._storing, return_exceptions=True)

    async def _store(self) -> None:
        try:
            while self._waiting:
                batch = self._waiting[:MAX_BATCH_JOBS]
                del self._waiting[:MAX_BATCH_JOBS]
                await self._append(batch)
        finally:
            self._storing = None
            for _, future in self._waiting:  # only when cancelled: nothing will store them
                future.cancel()
            self._waiting.clear()

    async def _append(self, batch: list[Waiting]) -> None:
        """Append ``batch`` and settle each submission's future; a batch too large for
        one event is appended in halves."""
        try:
            appended = await self._append_event(batch)
        except EventTooLarge as error:
            if len(batch) == 1:
                _settle(batch, error=error)
                return
            half = len(batch) // 2
            await self._append(batch[:half])
            await self._append(batch[half:])
            return
        except asyncio.CancelledError:
            _settle(batch, error=ConnectionError("intake is stopping"))
            raise
        except Exception as error:  # every one of them is told; their clients retry
            log.warning("append of %d submissions failed: %s", len(batch), error)
            _settle(batch, error=error)
            return
        self.appends += 1
        _settle(batch, appended=appended)

    async def _append_event(self, batch: list[Waiting]) -> Appended:
        if len(batch) == 1:
            submission = batch[0][0]
            job_id = submission.event.job_id
            return await self.events.append(
                submission.event, msg_id=msgids.submission(job_id), headers=submission.trace
            )
        together = JobsSubmitted(
            meta=stamp("intake", self.clock), jobs=[submission for submission, _ in batch]
        )
        return await self.events.append(together)


def _settle(
    batch: list[Waiting], appended: Appended | None = None, error: BaseException | None = None
) -> None:
    for _, future in batch:
        if future.done():  # its request was given up
            continue
        if appended is not None:
            future.set_result(appended)
        else:
            future.set_exception(error or RuntimeError("not stored"))
            future.exception()  # its request may be gone: nobody is to be told twice
