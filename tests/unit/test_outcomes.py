"""Each job's outcome as the log tells it, for the metrics of a running cluster."""

import msgspec

from allot.bus.codec import encode
from allot.bus.eventlog import make_record
from allot.core import State, apply_record
from allot.proto.events import Event, Preemption, StopRequested
from allot.proto.subjects import subject_for
from allot.sim.outcomes import Outcomes
from tests import builders as b


def folded(*timed: tuple[float, Event]) -> Outcomes:
    state, outcomes = State(), Outcomes()
    for seq, (seconds, event) in enumerate(timed, start=1):
        event = msgspec.structs.replace(
            event, meta=msgspec.structs.replace(event.meta, at=int(seconds * 1e9))
        )
        record = make_record(seq, subject_for(event), encode(event), {})
        apply_record(state, record)
        outcomes.note(state, record)
    return outcomes


def test_a_preempted_run_ends_at_its_exit_and_counts_under_the_plans_ground() -> None:
    chosen = Preemption(job_id="j1", code="TIER", params={"for": "j2"})
    stop = StopRequested(meta=b.meta(), job_id="j1", grace_ns=10**9, reason="said anyhow")
    outcomes = folded(
        (0, b.node("n1", 2)),
        (1, b.submitted("j1", 2, resumable=True)),
        (2, b.plan(("j1", "n1", [0, 1]), basis_seq=2)),
        (3, b.started("j1", "n1", [0, 1])),
        (5, msgspec.structs.replace(b.plan(basis_seq=4), preemptions=[chosen])),
        (6, stop),
        (7, msgspec.structs.replace(b.exited("j1", "n1", 0), stopped_in_ns=10**8)),
        (8, b.preempted("j1", lost_gpu_ms=1500)),
    )
    [job] = outcomes.at(10.0)
    assert (job.submit_s, job.first_start_s, job.runs) == (1.0, 3.0, [(3.0, 7.0)])
    assert (job.preemptions, job.lost_gpu_s) == (1, 1.5)
    assert {g: (c.count, c.lost_gpu_s) for g, c in outcomes.preempted.items()} == {"TIER": (1, 1.5)}
