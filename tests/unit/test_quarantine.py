"""An operator's quarantine: from it on, the state is the fold of the log without the
event it names, in the services and in replay alike."""

import msgspec

from allot.bus.codec import encode
from allot.bus.eventlog import Record, make_record
from allot.core import DEFAULT_POLICY, JobStatus, State, apply_record, plan, refold
from allot.core.planning import policy_hash
from allot.core.replay import state_at, verify
from allot.proto.events import EventQuarantined
from allot.proto.subjects import subject_for
from tests import builders as b


def records(*events: object) -> list[Record]:
    return [
        make_record(seq, subject_for(event), encode(event), {})  # type: ignore[arg-type]
        for seq, event in enumerate(events, start=1)
    ]


def fold(log: list[Record]) -> State:
    """As a service folds: a quarantine refolds what came before it."""
    state = State()
    for record in log:
        apply_record(state, record)
        if state.refold_due:
            state.become(refold(state, log))
    return state


def quarantine(seq: int, reason: str = "forged") -> EventQuarantined:
    return EventQuarantined(meta=b.meta(), seq=seq, reason=reason, by="admin")


def test_a_quarantined_submission_and_what_followed_from_it_are_undone() -> None:
    log = records(
        b.node("n1", 8),
        b.submitted("forged", 8),
        b.plan(("forged", "n1", list(range(8)))),
        b.submitted("honest", 2),
        quarantine(2),
    )
    state = fold(log)
    assert "forged" not in state.jobs
    assert state.nodes["n1"].allocated == {}
    assert state.jobs["honest"].status == JobStatus.PENDING
    reasons = {i.seq: i.reason for i in state.ignored}
    assert reasons[2] == "quarantined: forged"
    assert reasons[3].endswith("job is not pending")
    assert state.refolds == 1
    assert not state.refold_due
    # What was folded after the quarantine is kept as a fold without the event would.
    assert state.seq == 5


def test_a_quarantined_log_folds_as_the_log_without_the_event_and_is_said_once() -> None:
    events = [
        b.node("n1", 8),
        b.submitted("x", 4),
        b.submitted("y", 4),
        b.plan(("x", "n1", [0, 1, 2, 3]), ("y", "n1", [4, 5, 6, 7])),
    ]
    quarantined = fold(records(*events, quarantine(3), quarantine(3, "again")))
    assert quarantined.quarantined == {3: "forged"}
    assert quarantined.refolds == 1
    without = fold(records(*events[:2], b.node("n2", 1), *events[3:]))  # same seqs
    assert quarantined.jobs.keys() == without.jobs.keys()
    assert quarantined.nodes["n1"].allocated == without.nodes["n1"].allocated
    assert quarantined.holders == without.holders


def test_a_quarantine_must_name_an_earlier_event() -> None:
    log = records(b.node("n1", 8), quarantine(2), quarantine(9))
    state = fold(log)
    assert state.refolds == 0
    assert [i.reason for i in state.ignored] == [
        "sequence 2 is not before the quarantine",
        "sequence 9 is not before the quarantine",
    ]


def test_replay_verifies_a_plan_made_after_a_quarantine() -> None:
    log = records(
        b.node("n1", 8),
        b.submitted("forged", 8),
        b.submitted("honest", 2),
        quarantine(2),
    )
    live = fold(log)
    decided = plan(live, 5_000, DEFAULT_POLICY)
    assert [a.job_id for a in decided.admissions] == ["honest"]
    recorded = decided.recorded(
        b.meta(),
        basis_seq=live.seq,
        now=5_000,
        policy=DEFAULT_POLICY.name,
        policy_hash=policy_hash(DEFAULT_POLICY),
        code_version="test",
    )
    log = records(*[r.event for r in log], recorded)
    result = verify(log, log, "test")
    assert result.divergences == []
    assert result.plans == 1
    state, _ = state_at(log)
    assert "forged" not in state.jobs
    assert state.jobs["honest"].status == JobStatus.ADMITTED


def test_a_refused_or_quarantined_plan_is_still_the_one_the_next_plan_follows() -> None:
    # The planner appends guarded by the plan subject's last sequence: a plan the fold
    # ignored but forgot would make every later append conflict, for good.
    malformed = msgspec.structs.replace(b.plan(("j1", "n1", [0])), now=-1)
    state = fold(records(b.node("n1", 8), b.submitted("j1", 1), malformed))
    assert state.ignored[-1].reason.startswith("malformed: now=-1")
    assert state.last_plan_seq == 3
    log = records(b.node("n1", 8), b.submitted("j1", 1), b.plan(("j1", "n1", [0])), quarantine(3))
    state = fold(log)
    assert "j1" in state.pending
    assert state.last_plan_seq == 3
