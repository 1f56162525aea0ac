"""Starting from a snapshot of the folded log, and writing one (docs/adr/0024).

A service that starts from a snapshot folds only the log after it. A snapshot that cannot
be read, does not decode, or was written by other decision code is not trusted: the
service folds from sequence 1, and says why in one line. The planner writes them, when it
is caught up, every so many events and not more often than every so many seconds; the
bytes are taken at once (the state goes on changing) and stored in the background.
"""

import asyncio
import contextlib
import gc
import logging
import time
from collections.abc import Iterator

import nats

from allot.bus.eventlog import EventLog
from allot.bus.snapshots import BASE, OBJECT, SnapshotUnreadable, read_snapshot, write_snapshot
from allot.core import State
from allot.core.snapshot import SnapshotError, decode_snapshot, encode_snapshot

log = logging.getLogger("allot")


async def load_snapshot(events: EventLog, code_version: str, name: str = OBJECT) -> State | None:
    """The state the stored snapshot ``name`` holds, if it can be trusted and the log has
    reached it; None (and one line saying why, where there was one) to fold from the start."""
    instead = "folding the log from sequence 1" if name == OBJECT else f"no {name} snapshot"
    try:
        data = await read_snapshot(events.js, name)
        if data is None:
            log.info("no snapshot stored: %s", instead)
            return None
        # Millions of objects are made at once and all live on: collecting while they are
        # made only rescans them.
        with _collector_paused():
            state = decode_snapshot(data, code_version)
        # A log begun again under kept snapshots: starting there would skip what it holds.
        if state.seq > (end := await events.last_seq()):
            raise SnapshotError(f"it is at sequence {state.seq}, past the end of the log ({end})")
    except (SnapshotUnreadable, SnapshotError) as why:
        log.warning("snapshot not used, %s: %s", instead, why)
        return None
    except (nats.errors.Error, TimeoutError) as error:
        log.warning("snapshot not read, %s: %r", instead, error)
        return None
    which = "" if name == OBJECT else f"{name} "
    log.info("starting from the %ssnapshot at sequence %d (%d bytes)", which, state.seq, len(data))
    return state


async def start_from_snapshot(events: EventLog, state: State, code_version: str) -> bool:
    """Make ``state`` (nothing folded yet) the stored snapshot's, if it can be trusted."""
    restored = await load_snapshot(events, code_version)
    if restored is None:
        return False
    state.become(restored)
    return True


class ArchivedLog(Exception):
    """The log's start was archived and no trusted snapshot holds the state it leaves."""


async def archived_base(events: EventLog, code_version: str) -> State | None:
    """Where the start of the log was archived, the state the rest of it begins from
    (``allot log archive``); None where nothing was. ``ArchivedLog`` when there is no
    trusted one: folding what is left from nothing would be another state."""
    first = await events.first_seq()
    if first <= 1:
        return None
    base = await load_snapshot(events, code_version, BASE)
    if base is None or base.seq + 1 < first:
        at = "none" if base is None else f"one at sequence {base.seq}"
        raise ArchivedLog(
            f"the log before sequence {first} was archived, and no snapshot of this code "
            f"holds the state there ({at}): fold the archive again (docs/adr/0024)"
        )
    return base


async def cover_archived(events: EventLog, state: State, code_version: str) -> None:
    """A ``state`` that does not reach the start of what the log still holds starts from
    the archive's base instead; the service stops, saying why, if there is none."""
    try:
        if state.seq + 1 < await events.first_seq():
            base = await archived_base(events, code_version)
            assert base is not None
            state.become(base)
    except ArchivedLog as why:
        log.error("cannot start: %s", why)
        raise SystemExit(2) from None


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
        gc.freeze()  # what was restored lives as long as the service: never rescan it


class SnapshotWriter:
    """Writes a snapshot of a state once it is ``every_events`` events past the last one,
    at most every ``interval_s`` seconds; one at a time, each in the background."""

    def __init__(self, events: EventLog, code_version: str, every_events: int, interval_s: float):
        self.events = events
        self.code_version = code_version
        self.every_events = every_events
        self.interval_s = interval_s
        self.written_seq = 0  # where the last snapshot stored (or started from) is true
        self._written_at = -float("inf")
        self._writing: asyncio.Task[None] | None = None

    def started_from(self, state: State) -> None:
        self.written_seq = state.seq

    def due(self, state: State) -> bool:
        return (
            self.every_events > 0
            and state.seq - self.written_seq >= self.every_events
            and time.monotonic() - self._written_at >= self.interval_s
            and not state.refold_due
            and (self._writing is None or self._writing.done())
        )

    def maybe_write(self, state: State) -> None:
        """Take a snapshot of ``state`` if one is due, and store it in the background."""
        if not self.due(state):
            return
        self._written_at = time.monotonic()
        try:
            data = encode_snapshot(state, self.code_version)
        except SnapshotError as why:  # the service goes on; one is tried again later
            log.warning("snapshot at sequence %d not taken: %s", state.seq, why)
            return
        self._writing = asyncio.create_task(self._store(data, state.seq))

    async def _store(self, data: bytes, seq: int) -> None:
        description = f"the log folded up to sequence {seq} by {self.code_version}"
        try:
            await write_snapshot(self.events.js, data, description)
        except Exception as error:  # the bus away or too slow: a later one will do
            log.warning("snapshot at sequence %d not stored: %r", seq, error)
            return
        self.written_seq = max(self.written_seq, seq)
        log.info("snapshot at sequence %d stored (%d bytes)", seq, len(data))
