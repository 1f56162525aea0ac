"""Answers queries (``allot.proto.queries``) from the read model, once it has read the log.

Queries share the commands' runtime (``allot.services.commands``): bounded lanes, one reply
to every request, the sender named by the subject. They are answered only once the log has
been read to its end, so no answer describes a log half read.
"""

import argparse
import asyncio
import contextlib
import logging
from collections.abc import Callable

import msgspec

from allot.bus.eventlog import EventLog, Record
from allot.proto.commands import FieldError
from allot.proto.queries import (
    ACCOUNTS,
    EXPLAIN,
    JOB,
    JOBS,
    NODES,
    QUERIES,
    QUEUE,
    Answer,
)
from allot.services.commands import Commands, Lane
from allot.services.replies import Handler, Sender, decode_request
from allot.services.runtime import Clock, follow_state
from allot.services.view import web
from allot.services.view.joblog import JobLog
from allot.services.view.model import ReadModel

log = logging.getLogger("allot.view")
MAX_WAITING = 256  # queries; each is answered in about a millisecond
AT_ONCE = 64  # queries waiting for the log to be folded up to what they ask
CATCH_UP_S = 2.0  # how long a query waits for that, at most; then it is answered as it is
# The answer while a quarantine waits to be carried out: the client asks again (``log``).
REFOLDING = FieldError(
    field="log", value="", message="the log is being folded again after a quarantine; ask again"
)


class View:
    def __init__(self, events: EventLog, clock: Clock | None = None, refresh_s: float = 1.0):
        self.events = events
        self.clock = clock or Clock()
        self.model = ReadModel(self.clock, refresh_s)
        self.commands = Commands("view", self.clock)
        self._moved = asyncio.Event()  # set, and replaced, as each record is folded
        lane = Lane(at_once=AT_ONCE, max_waiting=MAX_WAITING)
        handlers: dict[str, Callable[..., Answer]] = {
            JOBS: self.model.jobs,
            JOB: self.model.job,
            QUEUE: self.model.queue,
            EXPLAIN: self.model.explain,
            NODES: self.model.nodes,
            ACCOUNTS: self.model.accounts,
        }
        for name, method in handlers.items():
            self.commands.answer(name, self._handler(name, method), lane)

    async def run(self) -> None:
        await follow_state(
            self.events,
            self.model.state,
            self._caught_up,
            self.model.refresh_s,
            note=self._folded,
            fold_record=self.model.fold,
        )

    def _folded(self, record: Record | None = None) -> None:
        self._moved.set()
        self._moved = asyncio.Event()

    def _folding(self, seq: int) -> bool:
        """Whether the state is not yet what the log up to ``seq`` says: not folded that
        far, or a quarantine folded and the log not yet folded again without its event
        (the follow loop reads the log for that, and queries are answered meanwhile)."""
        state = self.model.state
        return state.seq < seq or state.refold_due

    async def folded_to(self, seq: int, timeout_s: float = CATCH_UP_S) -> None:
        """Return once the log is folded up to ``seq``, or ``timeout_s`` has passed."""
        deadline = self.clock.monotonic() + timeout_s
        while self._folding(seq) and (left := deadline - self.clock.monotonic()) > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._moved.wait(), left)

    def _handler(self, name: str, method: Callable[..., Answer]) -> Handler:
        kind = QUERIES[name].request

        async def handle(payload: bytes, sender: Sender) -> msgspec.Struct:
            query = decode_request(payload, kind)
            if isinstance(query, FieldError):
                return Answer(errors=[query])
            await self.folded_to(getattr(query, "at_least", 0))
            if self.model.state.refold_due:  # what it holds is about to be replaced
                return Answer(errors=[REFOLDING])
            return method(query)

        return handle

    async def _caught_up(self) -> None:
        self._folded()  # after a refold too, which no record's fold announces
        self.model.refresh()
        await self.commands.serve(self.events.nc, self.model.state.seq)


async def serve(args: argparse.Namespace, events: EventLog) -> None:
    view = View(events, refresh_s=args.refresh)
    if args.dashboard_port is None:
        await view.run()
        return
    try:
        sock = web.listen(args.dashboard_host, args.dashboard_port)
    except OSError as error:  # the queries over NATS are served all the same
        log.error("no dashboard: %s:%d: %s", args.dashboard_host, args.dashboard_port, error)
        await view.run()
        return
    dashboard = web.Dashboard(
        view.model, ready=lambda: view.commands.serving, job_records=JobLog(events),
        hosts=web.names_for(args.dashboard_host), websocket=args.nats_websocket_url,
    )  # fmt: skip
    await web.run_beside(view.run(), dashboard, sock, events)
