"""No loss under a burst: every submission the intake acknowledged, 64 in flight through a
real nats-server, is in the log once and folded once; a retry with its key (sent while the
first is still in flight, or after) gets the same id and adds nothing; an array in the
burst is one submission of all its tasks; submissions that arrive together are appended
together."""

import asyncio
import collections
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from opentelemetry import context, trace
from opentelemetry.trace import NonRecordingSpan, SpanContext

from allot.bus import EmbeddedNats
from allot.bus.eventlog import Appended, EventLog, Record, submitted_traces
from allot.client import AsyncClient
from allot.core import State, apply_record
from allot.core.arrays import parse
from allot.proto.events import ArraySubmitted, Event, JobsSubmitted, submissions
from allot.services.intake.app import Intake
from tests import builders as b

SUBMISSIONS = 1500
IN_FLIGHT = 64


async def test_every_acknowledged_submission_is_in_the_log_and_folded_once(
    nats_server: EmbeddedNats, intake: Intake
) -> None:
    work: asyncio.Queue[int] = asyncio.Queue()
    for n in range(SUBMISSIONS):
        work.put_nowait(n)
    replies: dict[int, list[tuple[str, bool]]] = collections.defaultdict(list)

    async def submitter(client: AsyncClient) -> None:
        while not work.empty():
            n = work.get_nowait()
            key = f"k{n // 2}" if n % 10 < 4 else None  # pairs of retries, sent together
            spec = b.spec(account=f"lab/t{n % 7}")
            array = parse("0-49%5") if n % 500 == 0 else None
            if array is not None:
                key = f"array-{n}"
            reply = await client.submit(spec, idempotency_key=key, array=array)
            assert reply.job_id is not None
            replies[n].append((reply.job_id, reply.duplicate))

    async with await AsyncClient.connect(nats_server.url) as client:
        await asyncio.gather(*(submitter(client) for _ in range(IN_FLIGHT)))
        records = await client.events.read()

    acknowledged = {job_id for answers in replies.values() for job_id, _ in answers}
    logged = collections.Counter(e.job_id for r in records for e in submissions(r.event))
    assert set(logged) == acknowledged  # nothing lost, nothing the client was not told
    assert max(logged.values()) == 1  # a retry added nothing
    # Those that arrived while others were stored were appended together.
    appended = [r for r in records if submissions(r.event)]
    assert len(appended) < len(acknowledged) / 4
    assert any(isinstance(r.event, JobsSubmitted) for r in appended)
    assert intake.appender.appends == len(appended)
    duplicates = sum(1 for answers in replies.values() for _, dup in answers if dup)
    assert duplicates == len(replies) - len(acknowledged)  # each retry answered as one

    state = State()
    for record in records:
        apply_record(state, record)
    assert state.ignored_count == 0
    arrays = [
        e.job_id for r in records for e in submissions(r.event) if isinstance(e, ArraySubmitted)
    ]
    assert sorted(state.arrays) == sorted(arrays)
    assert len(arrays) == SUBMISSIONS // 500
    tasks = sum(len(state.arrays[a].tasks) for a in arrays)
    assert len(state.jobs) == len(acknowledged) - len(arrays) + tasks


async def test_each_submission_appended_together_keeps_its_own_trace(
    nats_server: EmbeddedNats, intake: Intake
) -> None:
    """The trace context each request came with, not that of whichever request began the
    append, is what each job's entry (or lone event) carries."""

    async def submit_in_trace(client: AsyncClient, n: int) -> tuple[str, str]:
        sent = SpanContext(trace_id=n + 1, span_id=n + 1, is_remote=True, trace_flags=1)
        context.attach(trace.set_span_in_context(NonRecordingSpan(sent)))  # this task's own
        reply = await client.submit(b.spec())
        assert reply.job_id is not None
        return reply.job_id, format(n + 1, "032x")

    async with await AsyncClient.connect(nats_server.url) as client:
        sent = dict(await asyncio.gather(*(submit_in_trace(client, n) for n in range(IN_FLIGHT))))
        records = await client.events.read()
    carried = {
        job_id: trace_context["traceparent"].split("-")[1]
        for record in records
        for job_id, trace_context in submitted_traces(record)
    }
    assert carried == sent
    assert any(isinstance(r.event, JobsSubmitted) for r in records)


async def test_a_retry_after_an_acknowledgement_was_lost_is_the_same_job(
    nats_server: EmbeddedNats, event_log: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Submissions stored, but the intake never heard so (the acknowledgement timed out),
    while the intake's reading of the log lags: their clients are told it was not stored
    and retry with their keys (the client does), and each retry is answered with the job
    that was stored, not appended again."""
    store, follow = event_log.append, event_log.follow
    lost: list[Event] = []
    reading = asyncio.Event()
    reading.set()

    async def acknowledgement_lost(event: Event, **options: Any) -> Appended:
        if not isinstance(event, JobsSubmitted) or lost:
            return await store(event, **options)
        lost.append(event)
        reading.clear()  # the intake falls behind the log for a while
        asyncio.get_running_loop().call_later(1.2, reading.set)
        await store(event, **options)
        raise TimeoutError("nats: timeout")

    async def lagging(*args: Any, **options: Any) -> AsyncIterator[Record]:
        async with contextlib.aclosing(follow(*args, **options)) as records:
            async for record in records:
                await reading.wait()
                yield record

    monkeypatch.setattr(event_log, "append", acknowledgement_lost)
    monkeypatch.setattr(event_log, "follow", lagging)
    await event_log.append(b.node("n1", 8))
    intake = Intake(event_log)
    running = asyncio.create_task(intake.run())
    try:
        async with await AsyncClient.connect(nats_server.url) as client:
            await client.ready(timeout=10, services=("intake",))
            sent = [client.submit(b.spec(), idempotency_key=f"k{n}") for n in range(IN_FLIGHT)]
            replies = await asyncio.gather(*sent)
            records = await client.events.read()
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
    assert lost
    logged = collections.Counter(e.job_id for r in records for e in submissions(r.event))
    assert max(logged.values()) == 1
    assert {reply.job_id for reply in replies} == set(logged)
    retried = {e.job_id for e in submissions(lost[0])}
    assert all(reply.duplicate for reply in replies if reply.job_id in retried)
