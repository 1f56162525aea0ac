"""A job's trace from the log alone (``allot trace``): spans, their parents and times, ids
that do not change from one reading to the next, and a waterfall."""

import msgspec
import pytest

from allot.bus.codec import encode
from allot.bus.eventlog import Record, make_record
from allot.client.jobtrace import NoSuchJob, folded, job_trace, jobs_since, waterfall
from allot.proto.events import ArraySubmitted, ArrayTasks, Event, IndexRange, JobCheckpointed
from allot.proto.subjects import subject_for
from tests import builders as b

S = 10**9
CLIENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def at(event: Event, seconds: float) -> Event:
    return msgspec.structs.replace(
        event, meta=msgspec.structs.replace(event.meta, at=int(seconds * S))
    )


def log(*timed: tuple[float, Event], traceparent: str = CLIENT) -> list[Record]:
    records = []
    for seq, (seconds, event) in enumerate(timed, start=1):
        headers = {"traceparent": traceparent} if seq == 2 and traceparent else {}
        event = at(event, seconds)
        records.append(make_record(seq, subject_for(event), encode(event), headers))
    return records


def checkpoint(step: int) -> JobCheckpointed:
    return JobCheckpointed(meta=b.meta(), job_id="j1", node_id="n1", path="/c", step=step)


HISTORY = [
    (0, b.node("n1", 2)),
    (10, b.submitted("j1", 2)),
    (11, b.plan(("j1", "n1", [0, 1]), basis_seq=2)),
    (12, b.started("j1", "n1", [0, 1])),
    *((12 + step, checkpoint(step)) for step in range(1, 5)),
    (20, b.exited("j1", "n1", 0)),
]


def test_a_finished_job_is_one_trace_of_a_wait_and_a_run() -> None:
    trace = job_trace("j1", log(*HISTORY))
    assert (trace.trace_id, trace.parent_id) == (CLIENT.split("-")[1], CLIENT.split("-")[2])
    assert (trace.status, trace.ended) == ("succeeded", True)
    job, queued, run = trace.spans
    assert [(s.name, s.start // S, (s.end or 0) // S) for s in trace.spans] == [
        ("job j1", 10, 20), ("queued", 10, 12), ("run 0", 12, 20),
    ]  # fmt: skip
    assert queued.parent_id == run.parent_id == job.span_id
    assert job.parent_id == ""  # its parent is the client's span, outside the log
    assert [p.name for p in queued.points] == ["admitted to n1 [0, 1]"]
    assert run.attributes["allot.node"] == "n1"
    assert [p.name for p in run.points][-1] == "exited on n1: 0"
    again = job_trace("j1", log(*HISTORY))
    assert [s.span_id for s in again.spans] == [s.span_id for s in trace.spans]
    lines = waterfall(trace).splitlines()
    assert lines[0] == f"j1 (lab/team, batch, 2 GPUs): succeeded, 10s; trace {trace.trace_id}"
    assert "4 checkpoints, 1 to 4" in lines[-2]


def test_a_running_job_has_spans_still_going_on() -> None:
    trace = job_trace("j1", log(*HISTORY[:5]))
    assert not trace.ended
    assert [s.end for s in trace.spans] == [None, 12 * S, None]
    assert trace.now == 13 * S
    assert "…" in waterfall(trace)


@pytest.mark.parametrize(
    "traceparent", ["", "garbage", "00-" + "0" * 32 + "-b7ad6b7169203331-01", "00-XYZ-1-01"]
)
def test_a_job_without_a_usable_trace_context_gets_a_trace_of_its_own(traceparent: str) -> None:
    trace = job_trace("j1", log(*HISTORY, traceparent=traceparent))
    assert trace.parent_id == ""
    assert len(trace.trace_id) == 32
    assert trace.trace_id == job_trace("j1", log(*HISTORY, traceparent="")).trace_id
    assert trace.trace_id != job_trace("j2", log(*HISTORY, (30, b.submitted("j2")))).trace_id


def test_an_unknown_job_is_said_to_be_unknown() -> None:
    with pytest.raises(NoSuchJob, match="no job 'j9'"):
        job_trace("j9", log(*HISTORY))


def test_a_task_of_a_job_array_is_traced_from_the_array_s_submission() -> None:
    array = ArraySubmitted(
        meta=b.meta(), job_id="a", spec=b.spec(), array=ArrayTasks(indices=[IndexRange(0, 2)])
    )
    records = log(
        (0, b.node("n1", 2)),
        (10, array),
        (11, b.plan(("a_1", "n1", [0]), basis_seq=2)),
        (12, b.started("a_1", "n1", [0])),
        (20, b.exited("a_1", "n1", 0)),
    )
    trace = job_trace("a_1", records)
    assert trace.trace_id == CLIENT.split("-")[1]  # the array's, as its submission carried
    assert (trace.status, trace.ended) == ("succeeded", True)
    assert trace.spans[0].start == 10 * S  # from the array's submission
    assert jobs_since(records, 0, folded(records)) == ["a_0", "a_1", "a_2"]
    with pytest.raises(NoSuchJob, match="is a job array: trace one of its tasks"):
        job_trace("a", records)
