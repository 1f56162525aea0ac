"""The event log in memory: the contract of ``allot.bus.log`` kept as the NATS server keeps
it for ``EventLog``, for tests and tools that need a log and not a server.

Where the server has a rule the contract leaves open, this log follows the server (the
contract suite, tests/contract, checks it against both): the guards are checked before
duplicates are looked for, a message id stays known for the stream's duplicate window even
after its record was purged, and a purge past the end moves the end with it. One event
loop and no threads: an append is one step, as nothing in it awaits.
"""

import asyncio
from collections.abc import AsyncGenerator, Container, Mapping

import msgspec

from allot.bus.eventlog import (
    Appended,
    Conflict,
    Record,
    append_headers,
    encode_to_append,
    make_record,
    raw_headers,
    stop_if_cancelled,
)
from allot.bus.log import Log
from allot.proto.events import Event
from allot.proto.subjects import ALL_EVENTS, StreamSettings, subject_for, subject_matches


class MemoryEventLog(Log):  # a subclass, so that the type checker holds it to the contract
    def __init__(self, settings: StreamSettings | None = None):
        self.settings = settings or StreamSettings()
        self._records: list[Record] = []  # from ``_first`` on, ``backlog`` left 0
        self._first = 1
        self._last_on: dict[str, int] = {}  # subject -> the last sequence still held under it
        # message id -> (its sequence, the loop's time it was stored), oldest first
        self._ids: dict[str, tuple[int, float]] = {}
        self._grown = asyncio.Event()  # set, and replaced, at each append

    async def ensure_stream(self) -> None:
        """There is always one."""

    async def close(self) -> None:
        """Nothing to let go of; what it holds stays readable."""

    async def append(
        self,
        event: Event,
        *,
        msg_id: str | None = None,
        expected_last_seq: int | None = None,
        expected_last_subject_seq: int | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Appended:
        data = encode_to_append(event)
        subject = subject_for(event)
        all_headers = append_headers(
            event, msg_id, headers, expected_last_seq, expected_last_subject_seq
        )
        self._guard(subject, expected_last_seq, expected_last_subject_seq)
        known_as = all_headers["Nats-Msg-Id"]
        now = asyncio.get_running_loop().time()
        self._forget_ids_before(now - self.settings.duplicate_window_s)
        if known_as in self._ids:
            return Appended(seq=self._ids[known_as][0], duplicate=True)
        seq = self._store(subject, data, all_headers)
        self._ids[known_as] = (seq, now)
        return Appended(seq=seq, duplicate=False)

    async def append_raw(
        self, subject: str, data: bytes, headers: Mapping[str, str], expected_last_seq: int
    ) -> int:
        if not any(subject_matches(subject, s) for s in self.settings.subjects):
            raise ValueError(f"{subject!r} is not under the stream's subjects")
        self._guard(subject, expected_last_seq, None)
        return self._store(subject, data, raw_headers(headers, expected_last_seq))

    async def last_seq(self) -> int:
        return self._last

    async def first_seq(self) -> int:
        return self._first

    async def purge_before(self, seq: int) -> None:
        if seq <= self._first:
            return
        self._records = self._records[seq - self._first :]
        self._first = seq  # past the end, the end moves along: sequences are never reused
        self._last_on = {r.subject: r.seq for r in self._records}

    async def read(self, from_seq: int = 1, to_seq: int | None = None) -> list[Record]:
        end = self._last if to_seq is None else to_seq
        if end < from_seq:
            return []
        while self._last < end:  # as over NATS, a read waits for what it asks for
            await self._grown.wait()
        start = max(from_seq, self._first) - self._first
        chosen = self._records[start : max(start, end - self._first + 1)]
        return [_backlog(record, self._last - record.seq) for record in chosen]

    async def follow(
        self, from_seq: int = 1, subject: str = ALL_EVENTS, reads: Container[str] | None = None
    ) -> AsyncGenerator[Record, None]:
        # ``reads`` saves nothing here: a record was decoded once, as it was appended.
        next_seq = max(1, from_seq)
        while True:
            stop_if_cancelled()  # as over NATS (its docstring)
            held = self._records[max(0, next_seq - self._first) :]
            batch = [r for r in held if subject_matches(r.subject, subject)]
            if held:
                next_seq = held[-1].seq + 1
            if not batch:
                await self._grown.wait()
                continue
            for n, record in enumerate(batch):
                # As a consumer's next message would, let the loop run others in between.
                await asyncio.sleep(0)
                stop_if_cancelled()
                yield _backlog(record, len(batch) - 1 - n)

    @property
    def _last(self) -> int:
        return self._first + len(self._records) - 1

    def _guard(
        self, subject: str, expected_last_seq: int | None, expected_last_subject_seq: int | None
    ) -> None:
        """``Conflict`` where the log moved past what the append expects; its subject's
        guard first, as the server checks them."""
        expected = expected_last_seq if expected_last_seq is not None else expected_last_subject_seq
        on_subject = self._last_on.get(subject, 0)
        if expected_last_subject_seq is not None and expected_last_subject_seq != on_subject:
            raise Conflict(expected or 0, f"wrong last sequence: {on_subject}")
        if expected_last_seq is not None and expected_last_seq != self._last:
            raise Conflict(expected_last_seq, f"wrong last sequence: {self._last}")

    def _store(self, subject: str, data: bytes, headers: dict[str, str]) -> int:
        seq = self._last + 1
        # The client names the stream it expects its message to be stored in, and the
        # server keeps that header with the others.
        stored = {**headers, "Nats-Expected-Stream": self.settings.name}
        self._records.append(make_record(seq, subject, data, stored))
        self._last_on[subject] = seq
        self._grown.set()
        self._grown = asyncio.Event()
        return seq

    def _forget_ids_before(self, oldest: float) -> None:
        while self._ids:
            known_as, (_, at) = next(iter(self._ids.items()))
            if at >= oldest:
                return
            del self._ids[known_as]


def _backlog(record: Record, backlog: int) -> Record:
    return msgspec.structs.replace(record, backlog=backlog)
