"""The event log: one JetStream stream, appended with optimistic concurrency, read in order.

``append`` sets ``Nats-Msg-Id`` (server-side de-duplication) and, when given, an expected
last sequence of the stream or of the event's subject; a log that moved on raises
``Conflict``. Reads and
follows use ordered consumers, so records arrive in sequence order without acks. Durable
consumers (``consume``) ack after the caller has handled a record: at-least-once.

A log opened ``direct`` (how users read their mirror) holds nothing on the server: it reads
by batches of direct gets, which the server answers and forgets. A consumer is server state
that whoever made it can make outlive them, and the server allows a stream only so many
(docs/adr/0015).
"""

import asyncio
import collections
import contextlib
import logging
import os
import ssl
from collections.abc import AsyncGenerator, Awaitable, Callable, Container, Iterator, Mapping

import msgspec
import nats
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    ExternalStream,
    StorageType,
    StreamConfig,
    StreamSource,
)
from nats.js.client import DEFAULT_JS_SUB_PENDING_BYTES_LIMIT
from nats.js.errors import APIError, NotFoundError, ServiceUnavailableError

from allot.bus import traced
from allot.bus.codec import decode, encode
from allot.bus.identity import Identity, connect_options
from allot.bus.urls import redacted, servers
from allot.proto.events import Event, JobsSubmitted, JobSubmitted, Meta
from allot.proto.limits import EVENT_HEADROOM_BYTES, MAX_EVENT_BYTES
from allot.proto.subjects import (
    ALL_EVENTS,
    MIRROR,
    MIRROR_API,
    MIRROR_DELIVER,
    StreamSettings,
    subject_for,
    under_own_subject,
)

WRONG_LAST_SEQUENCE = 10071  # JetStream's error code for a failed expected-last-sequence
RECONNECT_CHECK_S = 0.5  # how soon a follower notices that the connection came back
STALL_CHECK_S = 5.0  # a follower hearing nothing this long checks it is not missing the end
# How long a follower waits for an answer (its consumer made, the log's length) before it
# asks again: a request sent while a cluster elects the stream's leader is never answered,
# and one sent after the election should not wait out a long timeout first (docs/adr/0023).
FOLLOWER_ASKS_S = 1.0
DIRECT_BATCH = 256  # records per direct get
DIRECT_BATCH_BYTES = 4 << 20  # and at most this much of them
DIRECT_ANSWER_S = 5.0  # how long an answer to a direct get may take
DIRECT_IDLE_S = 1.0  # the longest a direct follower waits before it asks again
DIRECT_QUICK_S = 0.02  # and the shortest
# What the server adds to each message a direct get answers with; not part of the record.
_DIRECT_HEADERS = frozenset(
    (
        "Nats-Stream",
        "Nats-Subject",
        "Nats-Sequence",
        "Nats-Time-Stamp",
        "Nats-Num-Pending",
        "Nats-Last-Sequence",
    )
)
log = logging.getLogger("allot.bus")
# What JetStream's API does while a server is away or a stream has no leader: no answer
# in time, nobody to answer, or "temporarily unavailable" (503). Each passes; ask again.
NOT_ANSWERING = (
    TimeoutError,
    nats.errors.TimeoutError,
    nats.errors.NoRespondersError,
    ServiceUnavailableError,
)


class Conflict(Exception):
    """The stream moved past the sequence the append was computed from."""

    def __init__(self, expected_last_seq: int, detail: str):
        super().__init__(f"stream is past sequence {expected_last_seq}: {detail}")
        self.expected_last_seq = expected_last_seq


class EventTooLarge(ValueError):
    """An event too large for the log to take; nothing was sent."""

    def __init__(self, what: str):
        limit = MAX_EVENT_BYTES - EVENT_HEADROOM_BYTES
        super().__init__(f"{what}: the log takes events of at most {limit} bytes")


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
    # How many messages at least come after this one: the server's count at delivery or,
    # when following, those already delivered and waiting in the client, if more.
    backlog: int = 0
    data: bytes = b""  # the message as stored, for export


NOT_READ = "not decoded: a type its reader does not read"


def submitted_traces(record: Record) -> Iterator[tuple[str, Mapping[str, str]]]:
    """Each job ``record`` submits, with the trace context its submission carried: a
    submission appended alone carries it in the message's headers, one of a batch in the
    batch (``JobsSubmitted``)."""
    event = record.event
    if isinstance(event, JobSubmitted):
        yield event.job_id, record.headers
    elif isinstance(event, JobsSubmitted):
        for entry in event.jobs:
            yield entry.event.job_id, entry.trace


def new_meta(producer: str, at: int) -> Meta:
    """A fresh envelope. Ids are random; the producer's clock reading is passed in."""
    return Meta(id=os.urandom(16).hex(), at=at, producer=producer)


def encode_to_append(event: Event) -> bytes:
    """The bytes ``event`` is stored as; ``EventTooLarge`` when the log would not take them
    (NATS would close the connection over them, failing every request in flight)."""
    data = encode(event)
    if len(data) > MAX_EVENT_BYTES - EVENT_HEADROOM_BYTES:
        raise EventTooLarge(f"{type(event).__name__} of {len(data)} bytes")
    return data


def append_headers(
    event: Event,
    msg_id: str | None,
    headers: Mapping[str, str] | None,
    expected_last_seq: int | None,
    expected_last_subject_seq: int | None,
) -> dict[str, str]:
    """The headers an event is appended with, which its record keeps: the caller's, the
    trace context, the id duplicates are known by (the event's own unless given) and the
    guards."""
    all_headers = traced.carry(dict(headers or {}))
    all_headers["Nats-Msg-Id"] = msg_id or event.meta.id
    if expected_last_seq is not None:
        all_headers["Nats-Expected-Last-Sequence"] = str(expected_last_seq)
    if expected_last_subject_seq is not None:
        all_headers["Nats-Expected-Last-Subject-Sequence"] = str(expected_last_subject_seq)
    return all_headers


def raw_headers(headers: Mapping[str, str], expected_last_seq: int) -> dict[str, str]:
    """The headers a message is stored again with (``append_raw``): its own, guarded."""
    guarded = {**headers, "Nats-Expected-Last-Sequence": str(expected_last_seq)}
    guarded.pop("Nats-Msg-Id", None)  # an id reused in another era must not be dropped
    return guarded


class EventLog:
    def __init__(
        self,
        nc: NATS,
        settings: StreamSettings | None = None,
        *,
        direct: bool = False,
        api: str = "$JS.API",
    ):
        """``direct``: read by direct gets, holding no consumer on the server; ``api``: the
        subjects the stream's JetStream API is reached under."""
        self.nc = nc
        self.api = api
        self.js: JetStreamContext = nc.jetstream(prefix=api)
        self._js_follower = nc.jetstream(prefix=api, timeout=FOLLOWER_ASKS_S)
        self.settings = settings or StreamSettings()
        self.direct = direct
        # What a follower holds delivered and not yet read, at most; past it, NATS drops
        # what comes (a slow consumer). nats-py's default, unless a test wants it small.
        self.pending_bytes_limit = DEFAULT_JS_SUB_PENDING_BYTES_LIMIT

    @classmethod
    async def connect(
        cls,
        url: str,
        *,
        name: str = "allot",
        identity: Identity | None = None,
        tls: ssl.SSLContext | None = None,
        settings: StreamSettings | None = None,
    ) -> "EventLog":
        """Connect as ``identity`` (None: to a server without authorization, as ``name``),
        over ``tls`` where given, to ``url``: one server or a cluster's comma-separated
        list, any member of which will do (and another, when one goes)."""
        principal = identity.name if identity is not None else name
        nc = await nats.connect(
            servers(url),
            name=name,
            max_reconnect_attempts=-1,
            reconnect_time_wait=0.5,
            **_quiet_callbacks(),
            **connect_options(principal, identity, tls),
        )
        log = cls(nc, settings)
        await log.ensure_stream()
        return log

    async def close(self) -> None:
        # Every append has been acknowledged before it returned, so there is nothing to
        # drain; a drain would wait (up to its 30 s timeout) on consumers being torn down.
        if not self.nc.is_closed:
            await self.nc.close()

    async def ensure_stream(self) -> None:
        """Create the stream if there is none yet. An identity that may not (a node agent:
        the server lets the request go unanswered) waits until someone who may has."""
        s = self.settings
        config = StreamConfig(
            name=s.name,
            subjects=list(s.subjects),
            storage=StorageType.FILE,
            duplicate_window=s.duplicate_window_s,
            max_msg_size=s.max_msg_size,
            num_replicas=s.replicas,
        )
        await self._ensure(config)

    async def ensure_mirror(self) -> None:
        """Create the users' mirror of the log (``MIRROR``, in the users' account) if there
        is none yet; as ``ensure_stream``, wait until the log exists to be mirrored."""
        feed = ExternalStream(api=MIRROR_API, deliver=MIRROR_DELIVER)
        mirror = StreamConfig(
            name=MIRROR,
            mirror=StreamSource(name=self.settings.name, external=feed),
            storage=StorageType.FILE,
            max_msg_size=self.settings.max_msg_size,
            num_replicas=self.settings.replicas,  # readers lose it no sooner than the log
            allow_direct=True,  # users read it by direct gets only
        )
        await self._ensure(mirror)

    async def _ensure(self, config: StreamConfig) -> None:
        """Unanswered questions are waited out: a cluster just started, or one that lost
        its majority, answers nothing about a stream until it has elected the stream's
        leader (seconds, under load more than a request's timeout)."""
        assert config.name is not None
        while True:
            try:
                await self.js.stream_info(config.name)
                return
            except NOT_ANSWERING:
                log.info("no answer about stream %s yet; asking again", config.name)
            except NotFoundError:
                try:
                    await self.js.add_stream(config)
                    return
                except NOT_ANSWERING:
                    pass
            await asyncio.sleep(RECONNECT_CHECK_S)

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
        data = encode_to_append(event)
        all_headers = append_headers(
            event, msg_id, headers, expected_last_seq, expected_last_subject_seq
        )
        try:
            ack = await self.js.publish(
                subject_for(event), data, stream=self.settings.name, headers=all_headers
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
        guarded = raw_headers(headers, expected_last_seq)
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

    async def first_seq(self) -> int:
        """The first sequence the stream still holds: 1, unless its start was archived
        (then that of the first message after it, even with none there yet)."""
        info = await self.js.stream_info(self.settings.name)
        return max(1, int(info.state.first_seq))

    async def purge_before(self, seq: int) -> None:
        """Delete every message before sequence ``seq`` (``allot log archive``)."""
        await self.js.purge_stream(self.settings.name, seq=seq)

    async def read(self, from_seq: int = 1, to_seq: int | None = None) -> list[Record]:
        """Records ``from_seq..to_seq`` (inclusive; default: up to the current end)."""
        state = (await self.js.stream_info(self.settings.name)).state
        end = int(state.last_seq) if to_seq is None else to_seq
        records: list[Record] = []
        # Records purged (archived) are not there to wait for: with none left in the range,
        # a follower would wait for the next one to come.
        if end < max(from_seq, int(state.first_seq)):
            return records
        async with contextlib.aclosing(self.follow(from_seq)) as records_in_order:
            async for record in records_in_order:
                if record.seq > end:  # the range was purged meanwhile
                    break
                records.append(record)
                if record.seq >= end:
                    break
        return records

    async def follow(
        self, from_seq: int = 1, subject: str = ALL_EVENTS, reads: Container[str] | None = None
    ) -> AsyncGenerator[Record, None]:
        """Every record from ``from_seq`` on, in order, then new ones as they arrive. With
        ``reads``, records of other types come undecoded (``make_record``).

        After the connection came back, it subscribes again from the next record: the old
        ordered consumer would notice the loss only after missing several heartbeats,
        leaving the caller blind for many seconds after the bus returned. It does the same
        where the client dropped records it was sent faster than the caller read them (a
        slow consumer, catching up on a long log): a gap in the consumer's own numbering
        gives them away, and nats-py's ordered consumer would hand out what follows the gap
        as if nothing were missing. Where the last records were dropped, nothing follows to
        tell: a follower of the whole log that hears nothing for ``STALL_CHECK_S`` while the
        log is longer than what it has read subscribes again too; so does one whose consumer
        was on a cluster's member that died (docs/adr/0023)."""
        if self.direct:
            direct = self._follow_direct(from_seq, subject, reads)
            async with contextlib.aclosing(direct) as records:
                async for record in records:
                    yield record
            return
        loop = asyncio.get_running_loop()
        next_seq = max(1, from_seq)
        while True:
            reconnects = self.nc.stats["reconnects"]
            arrived = _Arrivals(self.pending_bytes_limit // 2)
            sub = await self._subscribe_ordered(subject, next_seq, arrived.put)
            delivered = 0  # the consumer's number of the last message handed out
            heard_at = loop.time()
            try:
                while self.nc.stats["reconnects"] == reconnects:
                    stop_if_cancelled()
                    if not arrived.messages:
                        if await arrived.wait(RECONNECT_CHECK_S):
                            heard_at = loop.time()
                        elif loop.time() - heard_at >= STALL_CHECK_S:
                            heard_at = loop.time()
                            if subject == ALL_EVENTS and await self._holds_from(next_seq):
                                log.warning("reading the log again from %d: nothing came "
                                            "of what it holds", next_seq)  # fmt: skip
                                break
                        continue
                    msg = arrived.take()
                    if msg.metadata.sequence.consumer != delivered + 1:
                        log.warning("reading the log again from %d: records were dropped "
                                    "(read too slowly)", next_seq)  # fmt: skip
                        break
                    delivered += 1
                    # What was delivered but not yet handed out is backlog too: a caller
                    # that decides whenever the backlog is empty then folds all that first.
                    buffered = len(arrived.messages) + sub.pending_msgs
                    record = to_record(msg, buffered, reads)
                    next_seq = record.seq + 1
                    yield record
            finally:
                with contextlib.suppress(nats.errors.Error):  # a closing connection drops it
                    await sub.unsubscribe()

    async def _holds_from(self, seq: int) -> bool:
        """Whether the log holds record ``seq``, or where its start was archived, any after
        it; also when it cannot say. In a cluster, that is while the stream has no leader:
        the one that died took this follower's consumer with it, and a new one can be made
        once another is elected."""
        try:
            state = (await self._js_follower.stream_info(self.settings.name)).state
            return int(state.last_seq) >= max(seq, int(state.first_seq))
        except NOT_ANSWERING:
            return True

    async def _subscribe_ordered(
        self, subject: str, start_seq: int, deliver: Callable[[Msg], Awaitable[None]]
    ) -> JetStreamContext.PushSubscription:
        """An ordered consumer from ``start_seq``, once the server answers (it may be away),
        handing each message to ``deliver``."""
        while True:
            try:
                return await self._js_follower.subscribe(
                    subject,
                    stream=self.settings.name,
                    cb=deliver,
                    ordered_consumer=True,
                    config=ConsumerConfig(
                        deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=start_seq
                    ),
                    pending_bytes_limit=self.pending_bytes_limit,
                )
            except NOT_ANSWERING:
                if self.nc.is_closed:
                    raise
                await asyncio.sleep(RECONNECT_CHECK_S)

    async def _follow_direct(
        self, from_seq: int, subject: str, reads: Container[str] | None = None
    ) -> AsyncGenerator[Record, None]:
        """``follow`` without a consumer: batches of direct gets from the next record on.
        With nothing new, it asks again after an eighth of the time the log has been
        quiet (within ``DIRECT_QUICK_S`` and ``DIRECT_IDLE_S``): news of a busy log comes
        at once, a quiet log costs a request a second. Nothing shared tells of new records:
        whatever every reader listened to, anyone could have answers aimed at."""
        loop = asyncio.get_running_loop()
        next_seq = max(1, from_seq)
        news_at = loop.time()
        while True:
            batch = await self._direct_batch(next_seq, subject, reads)
            stop_if_cancelled()
            for record in batch:
                next_seq = record.seq + 1
                yield record
            if batch:
                news_at = loop.time()
                continue
            quiet_s = loop.time() - news_at
            await asyncio.sleep(min(DIRECT_IDLE_S, max(DIRECT_QUICK_S, quiet_s / 8)))

    async def _direct_batch(
        self, from_seq: int, subject: str, reads: Container[str] | None = None
    ) -> list[Record]:
        """The records from ``from_seq`` on that one direct get answers with (none: there
        are none yet, or the server is away for now)."""
        records: list[Record] = []
        ended = asyncio.get_running_loop().create_future()

        async def on_answer(msg: Msg) -> None:
            headers = msg.headers or {}
            # 204: the end of the batch; 404: nothing from here. (A record's own headers
            # may say Status too; only the server's answers lack a sequence.)
            if "Nats-Sequence" not in headers:
                if not ended.done():
                    ended.set_result(None)
            else:
                records.append(_direct_record(msg.data, headers, reads))

        inbox = self.nc.new_inbox()
        answers = await self.nc.subscribe(inbox, cb=on_answer)
        ask = {
            "seq": from_seq,
            "next_by_subj": subject,
            "batch": DIRECT_BATCH,
            "max_bytes": DIRECT_BATCH_BYTES,
        }
        try:
            subject_of_api = f"{self.api}.DIRECT.GET.{self.settings.name}"
            await self.nc.publish(subject_of_api, msgspec.json.encode(ask), inbox)
            await asyncio.wait_for(ended, DIRECT_ANSWER_S)
        except (TimeoutError, nats.errors.ConnectionClosedError):
            if self.nc.is_closed:
                raise
            # Away, or the answer was cut off: the records before the gap are good (they
            # come in order); the rest is asked for again.
            if not records:
                await asyncio.sleep(RECONNECT_CHECK_S)
        finally:
            with contextlib.suppress(nats.errors.Error):
                await answers.unsubscribe()
        return records

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


def stop_if_cancelled() -> None:
    """Raise ``CancelledError`` in a task that was asked to stop. Python 3.11's
    ``asyncio.wait_for`` (nats-py waits for answers with it) drops a cancellation that
    arrives as what it waits for does, anywhere in a service's task: its follower, where
    the task waits, checks at every turn, or the service would never stop."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


class _Arrivals:
    """The messages an ordered consumer's callback was handed, until ``follow`` reads them.

    A callback, not ``next_msg``: nats-py makes a task, a ``wait_for`` and a uuid for every
    ``next_msg``, more than half of what a service spends on an event it folds. A reader
    slower than the log (catching up on a long one) leaves the callback waiting once more
    than ``limit`` bytes wait here: the subscription's own buffer then fills, and past it
    NATS drops what comes (a gap ``follow`` sees and reads again from), as before."""

    def __init__(self, limit: int):
        self.messages: collections.deque[Msg] = collections.deque()
        self.limit = limit
        self._bytes = 0
        self._news = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()

    async def put(self, msg: Msg) -> None:
        self.messages.append(msg)
        self._bytes += len(msg.data)
        self._news.set()
        if self._bytes > self.limit:
            self._room.clear()
            await self._room.wait()

    def take(self) -> Msg:
        msg = self.messages.popleft()
        self._bytes -= len(msg.data)
        if self._bytes <= self.limit:
            self._room.set()
        return msg

    async def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a message; whether one came."""
        self._news.clear()
        if self.messages:
            return True
        try:
            async with asyncio.timeout(timeout):
                await self._news.wait()
        except TimeoutError:
            return False
        return True


def _quiet_callbacks() -> dict[str, Callable[..., Awaitable[None]]]:
    """Connection news as one line each, and an error said again only when it changes:
    nats-py's own callback logs a traceback at every reconnect attempt while the server is
    away."""
    last_error = ""

    async def error(problem: Exception) -> None:
        nonlocal last_error
        # A slow consumer is said once, not for each record dropped (each names its own
        # subject): ``follow`` reads what was dropped again.
        said = "slow consumer: records dropped" if isinstance(
            problem, nats.errors.SlowConsumerError) else str(problem)  # fmt: skip
        if said != last_error:
            last_error = said
            log.warning("NATS: %s", redacted(said) or type(problem).__name__)

    async def disconnected() -> None:
        log.warning("NATS: disconnected; reconnecting")

    async def reconnected() -> None:
        nonlocal last_error
        last_error = ""
        log.info("NATS: reconnected")

    return {"error_cb": error, "disconnected_cb": disconnected, "reconnected_cb": reconnected}


def _direct_record(
    data: bytes, headers: Mapping[str, str], reads: Container[str] | None = None
) -> Record:
    """A record from a direct get's answer, whose headers say where in the log it is."""
    own = {k: v for k, v in headers.items() if isinstance(k, str) and k not in _DIRECT_HEADERS}
    seq, subject = int(headers["Nats-Sequence"]), headers["Nats-Subject"]
    backlog = int(headers.get("Nats-Num-Pending", 0))
    return make_record(seq, subject, data, own, backlog, reads)


def to_record(msg: Msg, buffered: int = 0, reads: Container[str] | None = None) -> Record:
    """``buffered``: messages after this one already in the client, not yet handed out."""
    meta = msg.metadata
    headers = {k: v for k, v in (msg.headers or {}).items() if isinstance(v, str)}
    # The server counted what it had not sent yet when it sent this one; the client's
    # buffer holds what has come since. Each is a floor of what follows (they overlap), so
    # the larger is too, and it is 0 only when neither knows of more.
    backlog = max(meta.num_pending, buffered)
    return make_record(meta.sequence.stream, msg.subject, msg.data, headers, backlog, reads)


def make_record(
    seq: int,
    subject: str,
    data: bytes,
    headers: dict[str, str],
    backlog: int = 0,
    reads: Container[str] | None = None,
) -> Record:
    """A record of the log, its event decoded (or why not), from wherever it was read;
    with ``reads``, only if its type is one of them (else ``error`` is ``NOT_READ``)."""
    type_name = subject.rsplit(".", 1)[-1]
    if reads is not None and type_name not in reads:
        return Record(seq=seq, subject=subject, type=type_name, event=None, error=NOT_READ,
                      headers=headers, backlog=backlog, data=data)  # fmt: skip
    try:
        event: Event | None = decode(data)
        error = ""
    except msgspec.DecodeError as problem:
        event, error = None, f"undecodable {type_name}: {problem}"
    if event is not None and (misplaced := under_own_subject(subject, event)):
        event, error = None, f"misplaced {type_name}: {misplaced}"
    return Record(
        seq=seq,
        subject=subject,
        type=type_name,
        event=event,
        error=error,
        headers=headers,
        backlog=backlog,
        data=data,
    )
