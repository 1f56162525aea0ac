"""The event log: one JetStream stream, appended with optimistic concurrency, read in order.

``append`` sets ``Nats-Msg-Id`` (server-side de-duplication) and, when given, an expected
last sequence of the stream or of the event's subject; a log that moved on raises
``Conflict``. Reads and
follows use ordered consumers, so records arrive in sequence order without acks. Durable
consumers (``consume``) ack after the caller has handled a record: at-least-once.
"""

import contextlib
import uuid
from collections.abc import AsyncGenerator, Mapping

import msgspec
import nats
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, StorageType, StreamConfig
from nats.js.errors import APIError, NotFoundError

from allot.bus import tracing
from allot.bus.codec import decode, encode
from allot.proto.events import Event, Meta
from allot.proto.subjects import ALL_EVENTS, StreamSettings, subject_for

WRONG_LAST_SEQUENCE = 10071  # JetStream's error code for a failed expected-last-sequence


class Conflict(Exception):
    """The stream moved past the sequence the append was computed from."""

    def __init__(self, expected_last_seq: int, detail: str):
        super().__init__(f"stream is past sequence {expected_last_seq}: {detail}")
        self.expected_last_seq = expected_last_seq


class Appended(msgspec.Struct, frozen=True):
    seq: int
    duplicate: bool


class Record(msgspec.Struct, frozen=True, kw_only=True):
    """One message of the log. ``event`` is None when it could not be decoded; then
    ``error`` says why and ``type`` is the subject's last token."""

    seq: int
    subject: str
    type: str
    event: Event | None
    error: str = ""
    headers: dict[str, str] = {}
    pending: int = 0  # messages after this one, as the server counted at delivery
    data: bytes = b""  # the message as stored, for export


def new_meta(producer: str, at: int) -> Meta:
    """A fresh envelope. Ids are random; the producer's clock reading is passed in."""
    return Meta(id=uuid.uuid4().hex, at=at, producer=producer)


class EventLog:
    def __init__(self, nc: NATS, settings: StreamSettings | None = None):
        self.nc = nc
        self.js: JetStreamContext = nc.jetstream()
        self.settings = settings or StreamSettings()

    @classmethod
    async def connect(cls, url: str, *, name: str = "allot") -> "EventLog":
        nc = await nats.connect(url, name=name, max_reconnect_attempts=-1, reconnect_time_wait=0.5)
        log = cls(nc)
        await log.ensure_stream()
        return log

    async def close(self) -> None:
        # Every append has been acknowledged before it returned, so there is nothing to
        # drain; a drain would wait (up to its 30 s timeout) on consumers being torn down.
        if not self.nc.is_closed:
            await self.nc.close()

    async def ensure_stream(self) -> None:
        s = self.settings
        config = StreamConfig(
            name=s.name,
            subjects=list(s.subjects),
            storage=StorageType.FILE,
            duplicate_window=s.duplicate_window_s,
            max_msg_size=s.max_msg_size,
        )
        try:
            await self.js.stream_info(s.name)
        except NotFoundError:
            await self.js.add_stream(config)

    async def append(
        self,
        event: Event,
        *,
        msg_id: str | None = None,
        expected_last_seq: int | None = None,
        expected_last_subject_seq: int | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Appended:
        """Append one event. ``expected_last_seq`` guards the whole stream;
        ``expected_last_subject_seq`` only the event's own subject (0: nothing on it yet)."""
        all_headers = tracing.inject(dict(headers or {}))
        all_headers["Nats-Msg-Id"] = msg_id or event.meta.id
        if expected_last_seq is not None:
            all_headers["Nats-Expected-Last-Sequence"] = str(expected_last_seq)
        if expected_last_subject_seq is not None:
            all_headers["Nats-Expected-Last-Subject-Sequence"] = str(expected_last_subject_seq)
        try:
            ack = await self.js.publish(
                subject_for(event), encode(event), stream=self.settings.name, headers=all_headers
            )
        except APIError as error:
            if error.err_code == WRONG_LAST_SEQUENCE:
                expected = (
                    expected_last_seq
                    if expected_last_seq is not None
                    else expected_last_subject_seq
                )
                raise Conflict(expected or 0, error.description or "") from error
            raise
        return Appended(seq=ack.seq, duplicate=bool(ack.duplicate))

    async def append_raw(
        self, subject: str, data: bytes, headers: Mapping[str, str], expected_last_seq: int
    ) -> int:
        """Store a message exactly as given, as the stream's next one (``expected_last_seq``
        guards that): how an exported log is imported with its sequences."""
        guarded = {**headers, "Nats-Expected-Last-Sequence": str(expected_last_seq)}
        guarded.pop("Nats-Msg-Id", None)  # an id reused in another era must not be dropped
        try:
            ack = await self.js.publish(subject, data, stream=self.settings.name, headers=guarded)
        except APIError as error:
            if error.err_code == WRONG_LAST_SEQUENCE:
                raise Conflict(expected_last_seq, error.description or "") from error
            raise
        return int(ack.seq)

    async def last_seq(self) -> int:
        info = await self.js.stream_info(self.settings.name)
        return int(info.state.last_seq)

    async def read(self, from_seq: int = 1, to_seq: int | None = None) -> list[Record]:
        """Records ``from_seq..to_seq`` (inclusive; default: up to the current end)."""
        end = await self.last_seq() if to_seq is None else to_seq
        records: list[Record] = []
        if end < from_seq:
            return records
        async with contextlib.aclosing(self.follow(from_seq)) as records_in_order:
            async for record in records_in_order:
                records.append(record)
                if record.seq >= end:
                    break
        return records

    async def follow(
        self, from_seq: int = 1, subject: str = ALL_EVENTS
    ) -> AsyncGenerator[Record, None]:
        """Every record from ``from_seq`` on, in order, then new ones as they arrive."""
        sub = await self.js.subscribe(
            subject,
            stream=self.settings.name,
            ordered_consumer=True,
            config=ConsumerConfig(
                deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=max(1, from_seq)
            ),
        )
        try:
            while True:
                msg = await sub.next_msg(timeout=None)
                yield to_record(msg)
        finally:
            with contextlib.suppress(nats.errors.Error):  # a closing connection drops it anyway
                await sub.unsubscribe()

    async def consume(
        self, durable: str, subject: str = ALL_EVENTS, batch: int = 256
    ) -> AsyncGenerator[Record, None]:
        """A durable consumer: resumes where the last ack left off. A record is acked when
        the caller asks for the next one, so one that was being handled at a crash comes
        again (handlers must be idempotent)."""
        sub = await self.js.pull_subscribe(
            subject,
            durable=durable,
            stream=self.settings.name,
            config=ConsumerConfig(ack_policy=AckPolicy.EXPLICIT, ack_wait=30),
        )
        unacked: list[Msg] = []
        try:
            while True:
                try:
                    unacked = await sub.fetch(batch, timeout=5)
                except (TimeoutError, nats.errors.TimeoutError):
                    continue
                while unacked:
                    yield to_record(unacked[0])
                    await unacked.pop(0).ack()
        finally:
            # Hand back what was fetched but not handled, so it is redelivered at once
            # rather than after the ack wait.
            with contextlib.suppress(nats.errors.Error):
                for msg in unacked:
                    await msg.nak()
                await sub.unsubscribe()


def to_record(msg: Msg) -> Record:
    meta = msg.metadata
    headers = {k: v for k, v in (msg.headers or {}).items() if isinstance(v, str)}
    return make_record(meta.sequence.stream, msg.subject, msg.data, headers, meta.num_pending)


def make_record(
    seq: int, subject: str, data: bytes, headers: dict[str, str], pending: int = 0
) -> Record:
    """A record of the log, its event decoded (or why not), from wherever it was read."""
    type_name = subject.rsplit(".", 1)[-1]
    try:
        event: Event | None = decode(data)
        error = ""
    except msgspec.DecodeError as problem:
        event, error = None, f"undecodable {type_name}: {problem}"
    return Record(
        seq=seq,
        subject=subject,
        type=type_name,
        event=event,
        error=error,
        headers=headers,
        pending=pending,
        data=data,
    )
