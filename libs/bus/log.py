"""What a log is to those who append to it and read it: the contract that ``EventLog``
(over JetStream) and ``MemoryEventLog`` (in memory, for tests) both keep, and that one
suite checks against both (tests/contract).

- Sequences count from 1 and have no gaps; ``last_seq`` is 0 for an empty log.
- ``append`` stores the event, encoded by the one codec, under its own subject, with the
  headers the caller gave, the trace context and the message id it is known by. An id seen
  within the stream's duplicate window is not stored again: the append returns the
  sequence it was stored at, as a duplicate. ``expected_last_seq`` (the whole log) and
  ``expected_last_subject_seq`` (the event's subject only) guard it: a log that moved on
  raises ``Conflict``, whether or not the id was seen. An event too large for the log
  raises ``EventTooLarge``; neither stores anything.
- ``append_raw`` stores bytes as given at the next sequence (an import keeps sequences).
- ``read`` and ``follow`` give ``Record`` s in sequence order; one that cannot be decoded,
  or that is not under its own subject, is a record with ``event`` None and an ``error``
  (the fold records it as ignored). ``backlog`` says how many records at least come after
  one, among those followed. A follower whose task was asked to stop raises
  ``CancelledError`` at its next turn, even where some ``wait_for`` dropped the request.
- ``purge_before`` drops the start of the log (an archive); ``first_seq`` says where what
  is left begins. Sequences are never reused.
"""

from collections.abc import AsyncGenerator, Container, Mapping
from typing import Protocol

from allot.bus.eventlog import Appended, Record
from allot.proto.events import Event
from allot.proto.subjects import ALL_EVENTS, StreamSettings


class Log(Protocol):
    settings: StreamSettings  # its name and subjects, and what it takes

    async def ensure_stream(self) -> None:
        """Make the log if there is none yet."""

    async def append(
        self,
        event: Event,
        *,
        msg_id: str | None = None,
        expected_last_seq: int | None = None,
        expected_last_subject_seq: int | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Appended: ...

    async def append_raw(
        self, subject: str, data: bytes, headers: Mapping[str, str], expected_last_seq: int
    ) -> int: ...

    async def last_seq(self) -> int: ...

    async def first_seq(self) -> int: ...

    async def purge_before(self, seq: int) -> None: ...

    async def read(self, from_seq: int = 1, to_seq: int | None = None) -> list[Record]:
        """Records ``from_seq..to_seq`` (inclusive; default: up to the current end)."""
        ...

    def follow(
        self, from_seq: int = 1, subject: str = ALL_EVENTS, reads: Container[str] | None = None
    ) -> AsyncGenerator[Record, None]:
        """Every record under ``subject`` from ``from_seq`` on, then new ones as they come;
        with ``reads``, those of other types need not be decoded (the caller passes them
        over: ``allot.core.pass_over``)."""
        ...

    async def close(self) -> None: ...
