import asyncio
import contextlib

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from allot.bus import Conflict, EventLog, Record, eventlog, tracing
from allot.bus.eventlog import DIRECT_BATCH
from allot.proto.events import JobSubmitted
from tests import builders as b


async def test_append_returns_increasing_sequences_and_read_returns_them_in_order(
    event_log: EventLog,
) -> None:
    seqs = [(await event_log.append(b.submitted(f"j{i}"))).seq for i in range(5)]
    assert seqs == [1, 2, 3, 4, 5]
    records = await event_log.read()
    assert [r.seq for r in records] == seqs
    assert [r.event.job_id for r in records if isinstance(r.event, JobSubmitted)] == [
        f"j{i}" for i in range(5)
    ]
    assert [r.seq for r in await event_log.read(2, 3)] == [2, 3]
    assert await event_log.read(6) == []


async def test_a_message_id_seen_before_is_not_appended_again(event_log: EventLog) -> None:
    first = await event_log.append(b.submitted("j1"), msg_id="same")
    again = await event_log.append(b.submitted("j1"), msg_id="same")
    assert (first.seq, first.duplicate) == (1, False)
    assert (again.seq, again.duplicate) == (1, True)
    assert await event_log.last_seq() == 1


async def test_an_append_computed_from_an_old_prefix_conflicts(event_log: EventLog) -> None:
    await event_log.append(b.submitted("j1"))
    await event_log.append(b.submitted("j2"))
    with pytest.raises(Conflict) as raised:
        await event_log.append(b.plan(), expected_last_seq=1)
    assert raised.value.expected_last_seq == 1
    assert await event_log.last_seq() == 2
    appended = await event_log.append(b.plan(), expected_last_seq=2)
    assert appended.seq == 3


async def test_follow_delivers_old_and_new_records_with_pending_counts(event_log: EventLog) -> None:
    await event_log.append(b.submitted("j1"))
    await event_log.append(b.submitted("j2"))
    seen = []
    async with contextlib.aclosing(event_log.follow(1)) as records:
        async for record in records:
            seen.append((record.seq, record.pending))
            if record.seq == 2:
                await event_log.append(b.submitted("j3"))
            if record.seq == 3:
                break
    assert seen == [(1, 1), (2, 0), (3, 0)]


async def test_records_already_delivered_to_a_busy_reader_count_as_pending(
    event_log: EventLog,
) -> None:
    await event_log.append(b.submitted("j1"))
    seen = []
    async with contextlib.aclosing(event_log.follow(1)) as records:
        async for record in records:
            seen.append((record.seq, record.pending))
            if record.seq == 1:  # busy with it while three more arrive
                for job in ("j2", "j3", "j4"):
                    await event_log.append(b.submitted(job))
                await asyncio.sleep(0.3)
            if record.seq == 4:
                break
    assert seen == [(1, 0), (2, 2), (3, 1), (4, 0)]


async def test_a_durable_consumer_resumes_after_the_last_acknowledged_record(
    event_log: EventLog,
) -> None:
    for i in range(3):
        await event_log.append(b.submitted(f"j{i}"))

    async def take(count: int) -> list[int]:
        taken = []
        async with contextlib.aclosing(event_log.consume("tester")) as records:
            async for record in records:
                taken.append(record.seq)
                if len(taken) == count:
                    break
        return taken

    assert await take(2) == [1, 2]
    # Record 2 was being handled when the consumer stopped, so it was never acked: it comes again.
    await event_log.append(b.submitted("j3"))
    assert await asyncio.wait_for(take(3), 20) == [2, 3, 4]


async def test_an_undecodable_message_is_read_as_a_record_with_an_error(
    event_log: EventLog,
) -> None:
    await event_log.js.publish("allot.evt.job.x.JobTeleported", b'{"type":"JobTeleported"}')
    [record] = await event_log.read()
    assert record.event is None
    assert record.type == "JobTeleported"
    assert "JobTeleported" in record.error


async def test_the_trace_context_travels_in_the_headers(event_log: EventLog) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("submit") as span:
        await event_log.append(b.submitted("j1"))
        trace_id = span.get_span_context().trace_id
    [record] = await event_log.read()
    assert "traceparent" in record.headers
    carried = trace.get_current_span(tracing.extract(record.headers)).get_span_context()
    assert carried.trace_id == trace_id


async def test_an_append_can_guard_only_its_own_subject(event_log: EventLog) -> None:
    first_plan = await event_log.append(b.plan(), expected_last_subject_seq=0)
    await event_log.append(b.submitted("j1"))  # another subject: no conflict
    second_plan = await event_log.append(b.plan(), expected_last_subject_seq=first_plan.seq)
    assert second_plan.seq == 3
    with pytest.raises(Conflict):
        await event_log.append(b.plan(), expected_last_subject_seq=first_plan.seq)
    with pytest.raises(Conflict):
        await event_log.append(b.plan(), expected_last_subject_seq=0)
    assert await event_log.last_seq() == 3


async def directly(event_log: EventLog) -> EventLog:
    """The same log, read by direct gets (as users read their mirror)."""
    info = await event_log.js.stream_info(event_log.settings.name)
    info.config.allow_direct = True
    await event_log.js.update_stream(info.config)
    return EventLog(event_log.nc, event_log.settings, direct=True)


def as_read(record: Record) -> tuple[object, ...]:
    return (record.seq, record.subject, record.event, record.error, record.headers, record.data)


async def test_a_direct_reader_reads_what_a_consumer_reads(event_log: EventLog) -> None:
    count = 2 * DIRECT_BATCH + 7  # more than one batch of direct gets
    for i in range(count):
        await event_log.append(b.submitted(f"j{i}"), headers={"x-order": str(i)})
    await event_log.js.publish("allot.evt.job.x.JobTeleported", b"{not json")
    direct = await directly(event_log)
    by_consumer, by_direct_gets = await event_log.read(), await direct.read()
    assert len(by_direct_gets) == count + 1
    assert [as_read(r) for r in by_direct_gets] == [as_read(r) for r in by_consumer]
    assert [r.pending for r in by_direct_gets[-3:]] == [2, 1, 0]
    assert [r.seq for r in await direct.read(5, 9)] == [5, 6, 7, 8, 9]
    assert await direct.read(count + 2) == []


async def test_a_direct_reader_follows_new_records_and_keeps_no_consumer(
    event_log: EventLog,
) -> None:
    await event_log.append(b.submitted("j1"))
    await event_log.append(b.plan())
    direct = await directly(event_log)
    seen: list[tuple[int, str]] = []
    async with contextlib.aclosing(direct.follow(1, "allot.evt.job.>")) as records:
        async for record in records:
            seen.append((record.seq, record.type))
            info = await event_log.js.stream_info(event_log.settings.name)
            assert info.state.consumer_count == 0
            if record.seq == 1:
                await event_log.append(b.plan())  # not under the subject followed
                await event_log.append(b.submitted("j2"))
            if record.seq == 4:
                break
    assert seen == [(1, "JobSubmitted"), (4, "JobSubmitted")]


async def test_an_event_about_a_job_carries_the_jobs_trace_without_any_exporter(
    event_log: EventLog,
) -> None:
    """No SDK is set up here: the API's no-op spans still pass the job's context on."""
    job_trace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    await event_log.append(b.submitted("j1"), headers={"traceparent": job_trace})
    traces = tracing.JobTraces()
    for record in await event_log.read():
        traces.note(record)
    with tracing.job_span(traces, "j1", "node.JobStarted", {"allot.job.id": "j1"}):
        await event_log.append(b.started("j1", "node-1", [0]))
    await event_log.append(b.plan())  # outside: no trace
    _, started, plan = await event_log.read()
    assert started.headers["traceparent"] == job_trace
    assert "traceparent" not in plan.headers


@pytest.mark.parametrize(
    ("env", "exporting"),
    [
        ({}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, True),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, True),
        (
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318",
                "OTEL_TRACES_EXPORTER": "none",
            },
            False,
        ),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"},
            False,
        ),
    ],
)
def test_spans_are_exported_only_where_the_standard_variables_ask(
    env: dict[str, str], exporting: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                 "OTEL_TRACES_EXPORTER", "OTEL_SDK_DISABLED"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert tracing.exporting() is exporting


async def test_a_record_whose_own_headers_say_status_is_read_directly(
    event_log: EventLog,
) -> None:
    """The server's answers to a direct get carry a Status header; a record may too."""
    for status in ("404", "204", "100"):
        await event_log.append(b.submitted(f"j{status}"), headers={"Status": status})
    await event_log.append(b.submitted("last"))
    direct = await directly(event_log)
    assert [r.seq for r in await direct.read()] == [1, 2, 3, 4]
    assert [r.headers.get("Status") for r in await direct.read(1, 3)] == ["404", "204", "100"]


async def test_a_follower_that_falls_behind_its_buffer_still_reads_every_record(
    event_log: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A follower catching up on a long log is delivered records faster than it folds them;
    past its buffer, NATS drops what comes (a slow consumer). It must not stall short of
    the log's end, as a read model once did on a million events, answering nothing."""
    count = 1500
    for n in range(count):
        await event_log.append(b.submitted(f"j{n}", 1), msg_id=f"m{n}")
    event_log.pending_bytes_limit = 64 << 10  # a few hundred records
    monkeypatch.setattr(eventlog, "STALL_CHECK_S", 0.5)  # the test need not wait as long
    seen = 0
    async with asyncio.timeout(60), contextlib.aclosing(event_log.follow(1)) as records:
        async for record in records:
            assert record.seq == seen + 1  # in order, none skipped
            seen = record.seq
            await asyncio.sleep(0.0005)  # folding takes a while
            if seen == count:
                break
    assert seen == count


async def test_a_follower_asked_to_stop_stops_even_while_records_stream_in(
    event_log: EventLog,
) -> None:
    """A service stops by having its task cancelled. Python 3.11's ``wait_for``, under
    nats-py's ``next_msg``, drops a cancellation that arrives as a record does: the
    follower must stop all the same, not read on for ever."""
    for n in range(2000):
        await event_log.append(b.submitted(f"j{n}"))

    async def read_all() -> None:
        async for _ in event_log.follow(1):
            await asyncio.sleep(0)  # a fold's worth of work, letting the records pile up

    for attempt in range(40):
        reader = asyncio.create_task(read_all())
        await asyncio.sleep(0.01 + attempt * 0.005)
        reader.cancel()
        done, _ = await asyncio.wait([reader], timeout=3)
        assert done, f"the follower went on reading after it was cancelled (try {attempt})"
