"""The dashboard's server within a service's event loop, and a job's records read from the
log: only the job's own, and the plans that decided about it. The log is kept in memory:
how a job's records are picked out of it is the log's contract (tests/contract)."""

import asyncio
import contextlib
import time

import msgspec

from allot.bus import Log, MemoryEventLog, Record
from allot.core import JobRecord
from allot.core.arrays import parse
from allot.proto.events import ArraySubmitted, JobsSubmitted, PendingReason, Submission
from allot.services.view.joblog import JobLog, trace_view
from allot.services.view.model import ReadModel
from allot.services.view.web import STOP_S, Dashboard, keep_owed, listen, serve
from tests import builders as b

S = 10**9


async def folded(event_log: Log) -> ReadModel:
    model = ReadModel()
    for record in await event_log.read():
        model.fold(model.state, record)
    return model


async def ran_on_n1(event_log: Log, job_id: str) -> tuple[JobRecord, list[Record]]:
    """``job_id`` planned, run and ended on n1's GPU 0; the job as folded, and its records."""
    await event_log.append(b.plan((job_id, "n1", [0])))
    await event_log.append(b.started(job_id, "n1", [0]))
    await event_log.append(b.exited(job_id, "n1", 0))
    model = await folded(event_log)
    job = model.state.jobs[job_id]
    return job, await JobLog(event_log)(job, model.plan_seqs(job_id))


async def test_a_trace_reads_the_jobs_own_records_and_the_plans_that_name_it() -> None:
    event_log = MemoryEventLog()
    await event_log.append(b.node("n1", 2))
    await event_log.append(b.submitted("j1", 1, at=S))
    for n in range(20):  # other jobs, and plans about them only
        await event_log.append(b.submitted(f"other-{n}", 1, at=S))
    waiting = PendingReason(job_id="j1", code="NO_FIT", params={"need": 1})
    told = await event_log.append(msgspec.structs.replace(b.plan(), pending=[waiting]))
    await event_log.append(msgspec.structs.replace(b.plan(), pending=[]))
    admitted = await event_log.append(b.plan(("j1", "n1", [0])))
    await event_log.append(b.started("j1", "n1", [0]))
    await event_log.append(b.plan(("other-0", "n1", [1])))
    await event_log.append(b.exited("j1", "n1", 0))
    await event_log.append(b.submitted("j10", 1))  # a job whose id begins with j1's
    model = await folded(event_log)
    job = model.state.jobs["j1"]

    records = await JobLog(event_log)(job, model.plan_seqs("j1"))

    assert [r.type for r in records] == [
        "JobSubmitted", "PlanComputed", "PlanComputed", "JobStarted", "JobExited",
    ]  # fmt: skip
    assert [r.seq for r in records if r.type == "PlanComputed"] == [told.seq, admitted.seq]
    trace = trace_view(job, records, now=10 * S)
    assert (trace["status"], trace["ended"]) == ("succeeded", True)
    points = [p["name"] for span in trace["spans"] for p in span["points"]]
    assert points[:2] == ["waiting: NO_FIT", "admitted to n1 [0]"]


async def test_a_trace_of_a_job_submitted_together_with_others_reads_the_batch() -> None:
    event_log = MemoryEventLog()
    await event_log.append(b.node("n1", 2))
    await event_log.append(b.submitted("before", 1, at=S))
    carried = {"traceparent": f"00-{'ab' * 16}-{'cd' * 8}-01"}
    together = [Submission(event=b.submitted(j, 1, at=S), trace=carried) for j in ("j0", "j1")]
    batch = await event_log.append(JobsSubmitted(meta=b.meta(S), jobs=together))

    job, records = await ran_on_n1(event_log, "j1")

    assert [(r.type, r.seq) for r in records][:2] == [
        ("JobsSubmitted", batch.seq),
        ("PlanComputed", batch.seq + 1),
    ]
    trace = trace_view(job, records, now=10 * S)
    assert (trace["trace_id"], trace["parent_id"]) == ("ab" * 16, "cd" * 8)
    assert (trace["status"], trace["ended"]) == ("succeeded", True)
    assert trace["spans"][0]["name"] == "job j1"


async def test_a_task_s_trace_reads_its_array_s_submission_too() -> None:
    event_log = MemoryEventLog()
    await event_log.append(b.node("n1", 2))
    array = ArraySubmitted(meta=b.meta(S), job_id="a", spec=b.spec(), array=parse("0-2"))
    await event_log.append(array)

    job, records = await ran_on_n1(event_log, "a_1")

    assert [r.type for r in records] == [
        "ArraySubmitted",
        "PlanComputed",
        "JobStarted",
        "JobExited",
    ]
    trace = trace_view(job, records, now=10 * S)
    assert (trace["status"], trace["ended"]) == ("succeeded", True)


async def test_events_say_when_the_log_or_the_queue_moved_and_end_when_stopping() -> None:
    event_log = MemoryEventLog()
    await event_log.append(b.node("n1", 2))
    dashboard = Dashboard(await folded(event_log), ready=lambda: True)
    sock = listen("127.0.0.1", 0)
    port = sock.getsockname()[1]
    serving = asyncio.create_task(serve(dashboard, sock))
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /api/events HTTP/1.1\r\nHost: localhost\r\n\r\n")
    await writer.drain()
    head = await asyncio.wait_for(reader.readuntil(b"event: seq\ndata: "), 5)
    assert b"text/event-stream" in head
    said = msgspec.json.decode(await reader.readline())
    assert said == {"seq": 1, "queue_seq": -1, "ready": True}
    # The queue computed again (it lags the log by up to refresh_s) is news too: a page
    # that fetched the older one fetches it again.
    dashboard.model.refresh(force=True)
    await asyncio.wait_for(reader.readuntil(b"event: seq\ndata: "), 2)
    said = msgspec.json.decode(await reader.readline())
    assert said == {"seq": 1, "queue_seq": 1, "ready": True}

    began = time.monotonic()
    serving.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.wait_for(serving, STOP_S + 2)
    took = time.monotonic() - began
    assert took < 1.0, f"the server took {took:.1f}s to stop with an event stream open"
    rest = await asyncio.wait_for(reader.read(), 1)  # to the end of the connection
    assert rest == b"" or rest.endswith(b"0\r\n\r\n")  # the stream's last chunk
    writer.close()


async def test_owed_and_delivered_follow_the_log_off_the_queries_path() -> None:
    event_log = MemoryEventLog()
    await event_log.append(b.node("n1", 2))
    await event_log.append(b.submitted("j1", 1, at=S))
    model = await folded(event_log)
    assert model.owed is None
    keeping = asyncio.create_task(keep_owed(event_log, model, lambda: True, every_s=0.05))
    try:
        async with asyncio.timeout(10):
            while model.owed is None:
                await asyncio.sleep(0.02)
            assert model.owed.seq == 2
            assert [row["account"] for row in model.owed.rows] == ["lab", "lab/team"]
            await event_log.append(b.submitted("j2", 1, at=S, account="ops"))
            for record in await event_log.read(3):
                model.fold(model.state, record)
            while model.owed.seq < 3:
                await asyncio.sleep(0.02)
        assert "ops" in [row["account"] for row in model.owed.rows]
    finally:
        keeping.cancel()
