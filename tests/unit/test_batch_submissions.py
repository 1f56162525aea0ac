"""Submissions appended together (``JobsSubmitted``, docs/adr/0036): folded as each would
have been alone, ignored one by one, each in its own trace and trail."""

from pathlib import Path

import msgspec
import pytest
from opentelemetry import trace

from allot.bus.codec import decode, encode
from allot.bus.eventlog import Record
from allot.bus.tracing import JobTraces
from allot.client.jobtrace import job_trace
from allot.client.logfile import Line
from allot.core import State, apply, apply_record
from allot.core.arrays import parse
from allot.core.planning.memo import Ends
from allot.core.trail import trail
from allot.proto.events import ArraySubmitted, Event, JobsSubmitted, JobSubmitted, Submission
from allot.proto.subjects import subject_for
from allot.sim.metrics import wait_s
from allot.sim.outcomes import Outcomes
from allot.sim.trace import read_allot_log
from tests import builders as b

TRACE = "0af7651916cd43dd8448eb211c80319c"
PARENT = "b7ad6b7169203331"


def some_submissions() -> list[JobSubmitted]:
    array = JobSubmitted(meta=b.meta(1_300), job_id="arr", spec=b.spec(2), by="bob")
    return [
        b.submitted("j1", 1, at=1_100, by="alice", key="k1"),
        b.submitted("j2", 4, at=1_200, workers=2),
        ArraySubmitted(**msgspec.structs.asdict(array), array=parse("0-9%3")),
        msgspec.structs.replace(b.submitted("j3", at=1_400), spec=b.spec(account="lab/other")),
    ]


def batch(*events: JobSubmitted, at: int = 2_000, traces: bool = False) -> JobsSubmitted:
    carried = {"traceparent": f"00-{TRACE}-{PARENT}-01"} if traces else {}
    entries = [Submission(event=event, trace=carried) for event in events]
    return JobsSubmitted(meta=b.meta(at), jobs=entries)


def test_a_batch_folds_as_its_submissions_appended_alone() -> None:
    alone = b.fold(b.node("n1", 8), *some_submissions())
    together = b.fold(b.node("n1", 8), batch(*some_submissions()))
    assert together.jobs.keys() == alone.jobs.keys()
    for job_id, job in alone.jobs.items():
        other = together.jobs[job_id]
        assert (other.spec, other.status, other.submitted_by) == (
            job.spec,
            job.status,
            job.submitted_by,
        )
        assert (other.submitted_at, other.idempotency_key) == (
            job.submitted_at,
            job.idempotency_key,
        )
        assert other.submitted_seq == 2  # the batch's sequence
    assert together.arrays["arr"].tasks == alone.arrays["arr"].tasks
    assert together.arrays["arr"].released == alone.arrays["arr"].released == 3
    assert together.idempotency == alone.idempotency
    assert together.wanted == alone.wanted
    assert set(together.pending) == set(alone.pending)
    assert together.job_accounts.keys() == alone.job_accounts.keys()
    assert together.ignored_count == 0
    assert together.seq == 2


def test_a_submission_that_does_not_fit_is_ignored_alone() -> None:
    state = b.fold(b.submitted("taken"))
    malformed = b.submitted("zero", gpus=0)
    apply(state, 2, batch(b.submitted("taken"), malformed, b.submitted("fine")))
    assert set(state.jobs) == {"taken", "fine"}
    assert state.jobs["taken"].submitted_seq == 1  # the first submission stands
    assert state.seq == 2
    reasons = {note.reason.split(":")[0]: note for note in state.ignored}
    assert reasons.keys() == {"taken of a batch", "zero of a batch"}
    assert all(note.seq == 2 and note.type == "JobSubmitted" for note in state.ignored)
    assert "gpus" in reasons["zero of a batch"].reason


def test_an_empty_batch_is_ignored_as_malformed() -> None:
    state = b.fold(JobsSubmitted(meta=b.meta(), jobs=[]))
    assert state.ignored_count == 1
    assert "len(jobs)=0" in state.ignored[0].reason


def test_the_batch_has_a_subject_among_the_job_events_that_no_job_id_can_take() -> None:
    subject = subject_for(batch(b.submitted("j1")))
    assert subject == "allot.evt.job.JobsSubmitted"
    assert subject != subject_for(b.submitted("JobsSubmitted"))


def records_of(*events: Event) -> list[Record]:
    return [
        Record(seq=seq, subject=subject_for(event), type=type(event).__name__, event=event)  # type: ignore[arg-type]
        for seq, event in enumerate(events, start=1)
    ]


def test_each_job_of_a_batch_is_in_the_trace_its_submission_carried() -> None:
    [record] = records_of(batch(b.submitted("j1"), b.submitted("j2"), traces=True))
    traces = JobTraces()
    traces.note(record)
    for job_id in ("j1", "j2"):
        context = trace.get_current_span(traces.context(job_id)).get_span_context()
        assert format(context.trace_id, "032x") == TRACE
    assert not trace.get_current_span(traces.context("j3")).get_span_context().is_valid
    traced = job_trace("j2", records_of(batch(b.submitted("j1"), b.submitted("j2"), traces=True)))
    assert (traced.trace_id, traced.parent_id) == (TRACE, PARENT)
    assert traced.spans[0].name == "job j2"


def test_the_trail_of_a_batched_job_begins_with_its_submission_an_ignored_one_not() -> None:
    records = records_of(b.submitted("taken"), batch(b.submitted("taken"), b.submitted("j2")))
    [submitted] = trail(records, "j2")
    assert (submitted.what, submitted.seq) == ("submitted", 2)
    assert [step.seq for step in trail(records, "taken")] == [1]  # its second submission: no step


def test_a_batch_read_back_from_its_bytes_folds_to_the_same_state() -> None:
    event = batch(*some_submissions(), traces=True)
    first, second = b.fold(event), b.fold(decode(encode(event)))
    assert first.jobs == second.jobs
    assert first.arrays == second.arrays
    assert set(first.pending) == set(second.pending)


S = 10**9


def alone_or_together(jobs: list[JobSubmitted], together: bool) -> list[Event]:
    return [batch(*jobs, at=jobs[-1].meta.at)] if together else list(jobs)


@pytest.mark.parametrize("together", [False, True])
def test_the_metrics_see_a_waiting_job_submitted_in_a_batch(together: bool) -> None:
    jobs = [b.submitted(f"j{n}", gpus=8, at=S) for n in range(3)]  # more than there is
    state, outcomes = State(), Outcomes()
    for record in records_of(b.node("n1", 4), *alone_or_together(jobs, together)):
        apply_record(state, record)
        outcomes.note(state, record)
    assert sorted(o.job_id for o in outcomes.at(3601.0)) == ["j0", "j1", "j2"]
    assert [round(wait_s(o, 3601.0)) for o in outcomes.at(3601.0)] == [3600] * 3


@pytest.mark.parametrize("together", [False, True])
def test_the_simulator_reads_jobs_submitted_in_a_batch_from_an_exported_log(
    together: bool, tmp_path: Path
) -> None:
    submitted = [b.submitted(f"j{n}", at=S) for n in range(3)]
    events = [b.node("n1", 8), *alone_or_together(submitted, together)]
    for n in range(3):
        events.append(msgspec.structs.replace(b.started(f"j{n}", "n1", [n]), meta=b.meta(2 * S)))
        events.append(msgspec.structs.replace(b.exited(f"j{n}", "n1"), meta=b.meta(5 * S)))
    path = tmp_path / "log.jsonl"
    lines = [
        msgspec.json.encode(Line(seq=r.seq, subject=r.subject, event=msgspec.Raw(encode(r.event))))
        for r in records_of(*events)
    ]
    path.write_bytes(b"\n".join(lines) + b"\n")
    ran = [(job.job_id, job.submit_s, job.duration_s) for job in read_allot_log(path)]
    assert ran == [("j0", 0.0, 3.0), ("j1", 0.0, 3.0), ("j2", 0.0, 3.0)]


def test_the_planner_s_kept_ends_tell_apart_jobs_of_one_batch_that_end_together() -> None:
    """Two jobs of one batch, started together with one runtime, end at the same moment
    and share a submission: when one of them ends, the other's GPUs stay listed."""
    jobs = [b.submitted(f"j{n}", 1, max_runtime_ns=3600 * S) for n in range(2)]
    state = b.fold(b.node("n1", 2), batch(*jobs), b.plan(("j0", "n1", [0]), ("j1", "n1", [1])))
    for seq, event in enumerate([b.started("j0", "n1", [0]), b.started("j1", "n1", [1])], 4):
        apply(state, seq, event)
    kept = Ends().update(state, list(state.holders))
    assert [gpus for _, gpus in kept.released] == [{"n1": [0]}, {"n1": [1]}]
    apply(state, 6, b.exited("j0", "n1"))
    kept.update(state, ["j0"])
    assert kept.released == Ends().update(state, list(state.holders)).released
    assert [gpus for _, gpus in kept.released] == [{"n1": [1]}]
