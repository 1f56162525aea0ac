"""No loss under a burst: every submission the intake acknowledged, 64 in flight through a
real nats-server, is in the log once and folded once; a retry with its key (sent while the
first is still in flight, or after) gets the same id and adds nothing; an array in the
burst is one submission of all its tasks; submissions that arrive together are appended
together."""

import asyncio
import collections

from opentelemetry import context, trace
from opentelemetry.trace import NonRecordingSpan, SpanContext

from allot.bus import EmbeddedNats
from allot.bus.eventlog import submitted_traces
from allot.client import AsyncClient
from allot.core import State, apply_record
from allot.core.arrays import parse
from allot.proto.events import ArraySubmitted, JobsSubmitted, submissions
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
