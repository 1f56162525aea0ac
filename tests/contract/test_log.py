"""The event log's contract (``allot.bus.log``): appending with duplicates and guards,
reading and following in order, raw appends and purges, as every kind of log keeps it."""

import asyncio
import contextlib
import logging
from typing import cast

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from allot.bus import Appended, Conflict, EventLog, EventTooLarge, Log, Record, encode, tracing
from allot.core import State, apply_record
from allot.proto.events import JobSubmitted, NodeCordoned, NodeDrained
from allot.proto.limits import MAX_EVENT_BYTES
from allot.proto.subjects import StreamSettings
from allot.services.runtime import follow_state
from allot.services.telemetry.app import READS
from tests import builders as b
from tests.aio import background


def seqs(records: list[Record]) -> list[int]:
    return [r.seq for r in records]


async def test_an_empty_log_ends_at_0_and_begins_at_1(log: Log) -> None:
    assert (await log.first_seq(), await log.last_seq()) == (1, 0)
    assert await log.read() == []


async def test_append_returns_increasing_sequences_and_read_returns_them_in_order(
    log: Log,
) -> None:
    appended = [(await log.append(b.submitted(f"j{i}"))).seq for i in range(5)]
    assert appended == [1, 2, 3, 4, 5]
    records = await log.read()
    assert seqs(records) == appended
    assert [r.event.job_id for r in records if isinstance(r.event, JobSubmitted)] == [
        f"j{i}" for i in range(5)
    ]
    assert [r.subject for r in records] == [f"allot.evt.job.j{i}.JobSubmitted" for i in range(5)]
    assert seqs(await log.read(2, 3)) == [2, 3]
    assert await log.read(6) == []
    assert await log.read(3, 2) == []
    assert seqs(await log.read(0)) == appended


async def test_what_is_read_counts_the_records_after_it_as_pending(log: Log) -> None:
    for i in range(5):
        await log.append(b.submitted(f"j{i}"))
    assert [r.backlog for r in await log.read()] == [4, 3, 2, 1, 0]
    assert [r.backlog for r in await log.read(2, 3)] == [3, 2]


async def test_a_message_id_seen_before_is_not_appended_again(log: Log) -> None:
    first = await log.append(b.submitted("j1"), msg_id="same")
    again = await log.append(b.submitted("j2"), msg_id="same")  # whatever it holds
    assert (first.seq, first.duplicate) == (1, False)
    assert (again.seq, again.duplicate) == (1, True)
    assert await log.last_seq() == 1
    # Without an id of its own, an event is known by its envelope's.
    event = b.submitted("j3")
    assert await log.append(event) == Appended(seq=2, duplicate=False)
    assert await log.append(event) == Appended(seq=2, duplicate=True)


@pytest.mark.parametrize("settings", [StreamSettings(duplicate_window_s=0.25)])
async def test_an_id_is_forgotten_after_the_duplicate_window(log: Log) -> None:
    await log.append(b.submitted("j1"), msg_id="once")
    await asyncio.sleep(1.0)  # the server forgets on a timer of its own: give it time
    again = await log.append(b.submitted("j1"), msg_id="once")
    assert (again.seq, again.duplicate) == (2, False)


async def test_an_append_computed_from_an_old_prefix_conflicts(log: Log) -> None:
    await log.append(b.submitted("j1"))
    await log.append(b.submitted("j2"))
    with pytest.raises(Conflict) as raised:
        await log.append(b.plan(), expected_last_seq=1)
    assert raised.value.expected_last_seq == 1
    assert str(raised.value) == "stream is past sequence 1: wrong last sequence: 2"
    assert await log.last_seq() == 2
    appended = await log.append(b.plan(), expected_last_seq=2)
    assert appended.seq == 3


async def test_an_append_that_conflicted_left_its_id_free(log: Log) -> None:
    await log.append(b.submitted("j1"))
    with pytest.raises(Conflict):
        await log.append(b.plan(), msg_id="plan-1", expected_last_seq=0)
    again = await log.append(b.plan(), msg_id="plan-1", expected_last_seq=1)
    assert (again.seq, again.duplicate) == (2, False)


async def test_a_stored_append_sent_again_from_its_old_prefix_conflicts(log: Log) -> None:
    """The guard is checked before the id: a planner that sends its plan again after a
    lost answer learns that the log moved, not that its plan is there."""
    await log.append(b.plan(), msg_id="plan-1", expected_last_seq=0)
    with pytest.raises(Conflict):
        await log.append(b.plan(), msg_id="plan-1", expected_last_seq=0)
    assert await log.append(b.plan(), msg_id="plan-1", expected_last_seq=1) == Appended(
        seq=1, duplicate=True
    )


async def test_of_two_appends_computed_from_one_prefix_one_is_stored(log: Log) -> None:
    await log.append(b.submitted("j1"))
    outcomes = await asyncio.gather(
        log.append(b.plan(), expected_last_seq=1),
        log.append(b.plan(), expected_last_seq=1),
        return_exceptions=True,
    )
    assert sorted(type(o).__name__ for o in outcomes) == ["Appended", "Conflict"]
    assert await log.last_seq() == 2


async def test_an_append_can_guard_only_its_own_subject(log: Log) -> None:
    first_plan = await log.append(b.plan(), expected_last_subject_seq=0)
    await log.append(b.submitted("j1"))  # another subject: no conflict
    second_plan = await log.append(b.plan(), expected_last_subject_seq=first_plan.seq)
    assert second_plan.seq == 3
    with pytest.raises(Conflict) as raised:
        await log.append(b.plan(), expected_last_subject_seq=first_plan.seq)
    assert str(raised.value).endswith("wrong last sequence: 3")
    with pytest.raises(Conflict):
        await log.append(b.plan(), expected_last_subject_seq=0)
    with pytest.raises(Conflict) as raised:  # both guards wrong: the subject's is told
        await log.append(b.plan(), expected_last_seq=1, expected_last_subject_seq=0)
    assert str(raised.value) == "stream is past sequence 1: wrong last sequence: 3"
    assert await log.last_seq() == 3


async def test_an_event_too_large_for_the_log_is_refused_and_stores_nothing(log: Log) -> None:
    huge = b.submitted("huge", command=["x" * MAX_EVENT_BYTES])
    with pytest.raises(EventTooLarge, match="JobSubmitted of"):
        await log.append(huge)
    assert await log.last_seq() == 0
    assert (await log.append(b.submitted("j1"))).seq == 1


async def test_a_record_keeps_the_headers_it_was_appended_with(log: Log) -> None:
    event = b.plan()
    await log.append(event, headers={"x-why": "test"}, expected_last_seq=0)
    await log.append(b.plan(), msg_id="second", expected_last_subject_seq=1)
    first, second = await log.read()
    assert first.headers == {
        "x-why": "test",
        "Nats-Msg-Id": event.meta.id,
        "Nats-Expected-Last-Sequence": "0",
        "Nats-Expected-Stream": "ALLOT",
    }
    assert second.headers == {
        "Nats-Msg-Id": "second",
        "Nats-Expected-Last-Subject-Sequence": "1",
        "Nats-Expected-Stream": "ALLOT",
    }
    assert first.data == encode(event)
    assert first.event == event


async def test_the_trace_context_travels_in_the_headers(log: Log) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("submit") as span:
        await log.append(b.submitted("j1"))
        trace_id = span.get_span_context().trace_id
    [record] = await log.read()
    assert "traceparent" in record.headers
    carried = trace.get_current_span(tracing.extract(record.headers)).get_span_context()
    assert carried.trace_id == trace_id


async def test_an_event_about_a_job_carries_the_jobs_trace_without_any_exporter(
    log: Log,
) -> None:
    """No SDK is set up here: the API's no-op spans still pass the job's context on."""
    job_trace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    await log.append(b.submitted("j1"), headers={"traceparent": job_trace})
    traces = tracing.JobTraces()
    for record in await log.read():
        traces.note(record)
    with tracing.job_span(traces, "j1", "node.JobStarted", {"allot.job.id": "j1"}):
        await log.append(b.started("j1", "node-1", [0]))
    await log.append(b.plan())  # outside: no trace
    _, started, plan = await log.read()
    assert started.headers["traceparent"] == job_trace
    assert "traceparent" not in plan.headers


async def test_a_raw_append_stores_the_message_as_given_at_the_next_sequence(log: Log) -> None:
    event = b.submitted("j1")
    await log.append(event)
    subject = "allot.evt.job.j2.JobSubmitted"
    data = encode(b.submitted("j2"))
    # The id of an event of another era is not taken for a duplicate.
    headers = {"Nats-Msg-Id": event.meta.id, "x-kept": "yes"}
    assert await log.append_raw(subject, data, headers, expected_last_seq=1) == 2
    with pytest.raises(Conflict) as raised:
        await log.append_raw(subject, data, headers, expected_last_seq=1)
    assert raised.value.expected_last_seq == 1
    [record] = await log.read(2)
    assert (record.subject, record.data, record.error) == (subject, data, "")
    assert record.headers == {
        "x-kept": "yes",
        "Nats-Expected-Last-Sequence": "1",
        "Nats-Expected-Stream": "ALLOT",
    }


async def test_an_undecodable_or_misplaced_message_is_read_as_a_record_with_an_error(
    log: Log,
) -> None:
    await log.append_raw("allot.evt.job.x.JobTeleported", b'{"type":"JobTeleported"}', {}, 0)
    await log.append_raw("allot.evt.job.x.JobSubmitted", b"{not json", {}, 1)
    elsewhere = encode(b.submitted("j1"))  # under another job's subject
    await log.append_raw("allot.evt.job.j2.JobSubmitted", elsewhere, {}, 2)
    teleported, broken, misplaced = await log.read()
    assert [r.event for r in (teleported, broken, misplaced)] == [None, None, None]
    assert (teleported.type, broken.type) == ("JobTeleported", "JobSubmitted")
    assert teleported.error.startswith("undecodable JobTeleported: ")
    assert broken.error.startswith("undecodable JobSubmitted: JSON is malformed")
    assert misplaced.error.startswith("misplaced JobSubmitted: appended under ")
    assert broken.data == b"{not json"


async def test_purging_the_start_keeps_the_rest_at_its_sequences(log: Log) -> None:
    await log.append(b.plan(), msg_id="plan-1")
    for i in range(2, 6):
        await log.append(b.submitted(f"j{i}"))
    await log.purge_before(3)
    assert (await log.first_seq(), await log.last_seq()) == (3, 5)
    assert seqs(await log.read()) == [3, 4, 5]
    assert seqs(await log.read(1, 3)) == [3]
    assert await log.read(1, 2) == []
    await log.purge_before(2)  # before what is left: nothing changes
    assert await log.first_seq() == 3
    # The purged plan's id is still known; its subject holds nothing any more.
    assert await log.append(b.plan(), msg_id="plan-1") == Appended(seq=1, duplicate=True)
    assert (await log.append(b.plan(), expected_last_subject_seq=0)).seq == 6


async def test_purging_past_the_end_moves_the_end_along(log: Log) -> None:
    await log.append(b.submitted("j1"))
    await log.purge_before(10)
    assert (await log.first_seq(), await log.last_seq()) == (10, 9)
    assert await log.read() == []
    assert (await log.append(b.submitted("j2"))).seq == 10


async def test_follow_delivers_old_and_new_records_with_pending_counts(log: Log) -> None:
    await log.append(b.submitted("j1"))
    await log.append(b.submitted("j2"))
    seen = []
    async with contextlib.aclosing(log.follow(1)) as records:
        async for record in records:
            seen.append((record.seq, record.backlog))
            if record.seq == 2:
                await log.append(b.submitted("j3"))
            if record.seq == 3:
                break
    assert seen == [(1, 1), (2, 0), (3, 0)]


async def test_records_already_delivered_to_a_busy_reader_count_as_pending(log: Log) -> None:
    await log.append(b.submitted("j1"))
    seen = []
    async with contextlib.aclosing(log.follow(1)) as records:
        async for record in records:
            seen.append((record.seq, record.backlog))
            if record.seq == 1:  # busy with it while three more arrive
                for job in ("j2", "j3", "j4"):
                    await log.append(b.submitted(job))
                await asyncio.sleep(0.3)
            if record.seq == 4:
                break
    assert seen == [(1, 0), (2, 2), (3, 1), (4, 0)]


async def test_a_follower_of_some_subjects_reads_and_counts_only_theirs(log: Log) -> None:
    """How a job's trace reads its part of the log (``allot.services.view.joblog``)."""
    await log.append(b.submitted("j1"))
    await log.append(b.plan())
    await log.append(b.started("j1", "n1", [0]))
    await log.append(b.submitted("j2"))
    seen = []
    async with contextlib.aclosing(log.follow(1, "allot.evt.job.j1.>")) as records:
        async for record in records:
            seen.append((record.seq, record.backlog))
            if record.seq == 3:
                await log.append(b.plan())
                await log.append(b.exited("j1", "n1"))
            if record.seq == 6:
                break
    assert seen == [(1, 1), (3, 0), (6, 0)]
    async with contextlib.aclosing(log.follow(3, "allot.evt.plan.>")) as records:
        first = await anext(records)
    assert (first.seq, first.backlog) == (5, 0)


async def test_a_follower_past_the_end_waits_for_the_next_record(log: Log) -> None:
    await log.append(b.submitted("j1"))
    async with contextlib.aclosing(log.follow(2)) as records:
        waiting = asyncio.ensure_future(anext(records))
        await asyncio.sleep(0.2)
        assert not waiting.done()
        await log.append(b.submitted("j2"))
        record = await asyncio.wait_for(waiting, 5)
    assert (record.seq, record.backlog) == (2, 0)


async def test_a_follower_asked_to_stop_stops_even_while_records_stream_in(log: Log) -> None:
    """A service stops by having its task cancelled. Python 3.11's ``wait_for``, under
    nats-py's ``next_msg``, drops a cancellation that arrives as a record does: the
    follower must stop all the same, not read on for ever."""
    for n in range(2000):
        await log.append(b.submitted(f"j{n}"))

    async def read_all() -> None:
        async for _ in log.follow(1):
            await asyncio.sleep(0)  # a fold's worth of work, letting the records pile up

    for attempt in range(40):
        reader = asyncio.create_task(read_all())
        await asyncio.sleep(0.01 + attempt * 0.005)
        reader.cancel()
        done, _ = await asyncio.wait([reader], timeout=3)
        assert done, f"the follower went on reading after it was cancelled (try {attempt})"


async def test_a_follower_stops_when_its_task_lost_a_cancellation_elsewhere(log: Log) -> None:
    """Python 3.11's ``wait_for`` (under every nats-py request) drops a cancellation that
    arrives as its answer does: the service's task goes on, still asked to stop. Its
    follower is where it waits, so the follower must notice and stop it."""
    for n in range(3):
        await log.append(b.submitted(f"j{n}"))
    read = asyncio.Event()

    async def read_all() -> None:
        async for _ in log.follow(1):
            read.set()
            with contextlib.suppress(asyncio.CancelledError):  # as such a wait_for does
                await asyncio.sleep(0.5)

    reader = asyncio.create_task(read_all())
    await read.wait()
    reader.cancel()
    done, _ = await asyncio.wait([reader], timeout=5)
    assert done, "the follower went on waiting after its task was asked to stop"


async def test_a_follower_that_reads_only_node_events_passes_the_rest_over(log: Log) -> None:
    # What telemetry follows the log by: its state is caught up where everyone's is, with
    # the nodes as a whole fold has them and nothing else decoded, not even what is broken.
    await log.append(b.submitted("j1"))
    await log.append(b.node("n1", 8))
    broken = b'{"type":"JobSubmitted","meta":7}'
    await log.append_raw("allot.evt.job.j2.JobSubmitted", broken, {}, expected_last_seq=2)
    planned = await log.append(b.plan(("j1", "n1", [0])))
    await log.append(b.node("n2", 4))
    state, caught_up_at = State(), []

    async def on_caught_up() -> None:
        caught_up_at.append(state.seq)

    events = cast(EventLog, log)  # either kind keeps the contract follow_state reads by
    async with background(follow_state(events, state, on_caught_up, reads=READS)):
        async with asyncio.timeout(10):
            while 5 not in caught_up_at:
                await asyncio.sleep(0.01)
    whole = State()
    for record in await log.read():
        apply_record(whole, record)
    assert sorted(state.nodes) == sorted(whole.nodes) == ["n1", "n2"]
    assert state.nodes["n1"].gpus == whole.nodes["n1"].gpus
    assert (state.seq, state.last_plan_seq) == (whole.seq, whole.last_plan_seq) == (5, planned.seq)
    assert state.jobs == {}
    assert "j1" in whole.jobs
    assert state.ignored == []
    assert [i.seq for i in whole.ignored] == [3]


async def test_a_follower_that_passes_over_logs_nothing_its_partial_fold_ignores(
    log: Log, caplog: pytest.LogCaptureFixture
) -> None:
    # Begun from a whole fold (a snapshot) with a job on n1, it passes over the job's end,
    # so the drain that followed looks, to it alone, like one of a node still in use.
    await log.append(b.node("n1", 8))
    await log.append(b.submitted("j1"))
    await log.append(b.plan(("j1", "n1", [0])))
    state = State()
    for record in await log.read():
        apply_record(state, record)
    await log.append(NodeCordoned(meta=b.meta(), node_id="n1", drain=True))
    await log.append(b.exited("j1", "n1"))
    await log.append(NodeDrained(meta=b.meta(), node_id="n1"))
    caught_up_at: list[int] = []

    async def on_caught_up() -> None:
        caught_up_at.append(state.seq)

    events = cast(EventLog, log)
    with caplog.at_level(logging.WARNING, logger="allot"):
        async with background(follow_state(events, state, on_caught_up, reads=READS)):
            async with asyncio.timeout(10):
                while 6 not in caught_up_at:
                    await asyncio.sleep(0.01)
    assert state.nodes["n1"].draining
    assert [i.type for i in state.ignored] == ["NodeDrained"]  # what it does not read
    assert not [r for r in caplog.records if "ignored" in r.getMessage()]
