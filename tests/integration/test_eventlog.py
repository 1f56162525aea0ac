"""What ``EventLog`` does over JetStream beyond the log's contract (tests/contract): durable
consumers, reads by direct gets, and a follower that falls behind what NATS delivers."""

import asyncio
import contextlib

import pytest

from allot.bus import EventLog, Record, eventlog, traced
from allot.bus.eventlog import DIRECT_BATCH
from tests import builders as b


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
    assert [r.backlog for r in by_direct_gets[-3:]] == [2, 1, 0]
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
    assert traced.exporting() is exporting


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


async def test_a_follower_from_before_an_archived_start_waits_quietly(
    event_log: EventLog, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """``allot log tail -f`` on a log archived to its end follows from sequence 1: what
    the log holds is nothing it has missed, so it is not read again and again."""
    for n in range(3):
        await event_log.append(b.submitted(f"j{n}"))
    await event_log.purge_before(4)
    monkeypatch.setattr(eventlog, "STALL_CHECK_S", 0.2)
    async with contextlib.aclosing(event_log.follow(1)) as records:
        waiting = asyncio.ensure_future(anext(records))
        await asyncio.sleep(1.5)  # several stall checks
        await event_log.append(b.submitted("j3"))
        record = await asyncio.wait_for(waiting, 5)
    assert record.seq == 4
    assert "reading the log again" not in caplog.text
