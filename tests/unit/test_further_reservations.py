"""Reservations past the first (policy ``reservations``): each job short of room, in queue
order, gets the GPUs it will take once running jobs end, less those the reservations before
it count on; backfill may use what is set aside for it only where it ends before the start."""

import msgspec
import pytest

from allot.core import DEFAULT_POLICY, PlanMemo, apply, plan
from allot.core.planning import Plan, Policy
from allot.core.policytoml import PolicyError, read_policy
from allot.proto.events import Hold, Placement
from tests import builders as b
from tests.builders import fold
from tests.unit.test_admission import HOUR, NOW, reasons, running

TWO = msgspec.structs.replace(DEFAULT_POLICY, reservations=2)


def two_big_jobs_and_small_ones(short_runtime: int) -> list[object]:
    """Two nodes, 2 GPUs free on each: n1's others free in 1 h, n2's in 2 h. Two 8-GPU jobs
    wait, then a 2-GPU job with no declared end and one that declares ``short_runtime``."""
    return [
        b.node("n1", 8),
        b.node("n2", 8),
        *running("r1", "n1", [0, 1, 2, 3, 4, 5], ends_in=HOUR),
        *running("r2", "n2", [0, 1, 2, 3, 4, 5], ends_in=2 * HOUR),
        b.submitted("big1", 8, at=NOW),
        b.submitted("big2", 8, at=NOW),
        b.submitted("long", 2, at=NOW),
        b.submitted("short", 2, at=NOW, max_runtime_ns=short_runtime),
    ]


def admitted(decided: Plan) -> list[str]:
    return [a.job_id for a in decided.admissions]


def estimated_start(decided: Plan, job_id: str) -> object:
    return next(w for w in decided.waiting if w.reason.job_id == job_id).detail.get(
        "estimated_start"
    )


def test_with_one_reservation_the_second_big_job_loses_its_gpus_to_work_with_no_end() -> None:
    state = fold(*two_big_jobs_and_small_ones(short_runtime=HOUR))
    decided = plan(state, NOW, DEFAULT_POLICY, whole_queue=True)
    assert decided.further == []
    assert estimated_start(decided, "big2") is None
    assert "long" in admitted(decided)  # on n2's free GPUs, for as long as it likes


def test_a_second_reservation_keeps_its_gpus_from_work_that_would_outlast_its_start() -> None:
    state = fold(*two_big_jobs_and_small_ones(short_runtime=HOUR))
    decided = plan(state, NOW, TWO, whole_queue=True)
    assert decided.reservation is not None
    assert decided.reservation.job_id == "big1"
    [second] = decided.further
    assert (second.job_id, second.starts_at) == ("big2", NOW + 2 * HOUR)
    assert [p.node_id for p in second.placements] == ["n2"]
    assert [(p.node_id, p.gpus) for p in second.set_aside] == [("n2", [6, 7])]
    assert estimated_start(decided, "big2") == NOW + 2 * HOUR
    # The job that ends within the hour backfills; the one with no end waits, told whose
    # GPUs it would take.
    assert admitted(decided) == ["short"]
    assert reasons(decided)["long"] == ("RESERVED_FOR", {"job": "big1"})


@pytest.mark.parametrize(("runtime", "starts"), [(2 * HOUR, True), (2 * HOUR + 1, False)])
def test_backfill_on_a_further_reservation_ends_by_its_start(runtime: int, starts: bool) -> None:
    # n1's GPUs go to big1 in 1 h: only n2's, set aside for big2 from 2 h, are usable.
    state = fold(*two_big_jobs_and_small_ones(short_runtime=runtime))
    decided = plan(state, NOW, TWO, whole_queue=True)
    assert admitted(decided) == (["short"] if starts else [])
    if not starts:
        assert reasons(decided)["short"] == ("RESERVED_FOR", {"job": "big1"})


def test_a_further_reservation_leaves_what_the_first_counts_on() -> None:
    # One node, all of it free in 1 h: every GPU that comes free is big1's, so big2 gets
    # no estimate (and not the same start on the same GPUs).
    state = fold(
        b.node("n1", 8),
        *running("r1", "n1", [0, 1, 2, 3, 4, 5, 6, 7], ends_in=HOUR),
        b.submitted("big1", 8, at=NOW),
        b.submitted("big2", 8, at=NOW),
    )
    decided = plan(state, NOW, TWO, whole_queue=True)
    assert decided.reservation is not None
    assert decided.reservation.job_id == "big1"
    assert decided.further == []
    assert estimated_start(decided, "big2") is None


def test_no_more_reservations_than_the_policy_asks_for() -> None:
    events = [b.node(f"n{i}", 8) for i in range(4)]
    for i in range(4):
        events += running(f"r{i}", f"n{i}", [0, 1, 2, 3, 4, 5, 6], ends_in=(i + 1) * HOUR)
    events += [b.submitted(f"big{i}", 8, at=NOW) for i in range(4)]
    state = fold(*events)
    for count in (1, 2, 3, 4):
        policy = msgspec.structs.replace(DEFAULT_POLICY, reservations=count)
        decided = plan(state, NOW, policy, whole_queue=True)
        assert decided.reservation is not None
        reserved = [decided.reservation, *decided.further]
        assert [(r.job_id, r.starts_at) for r in reserved] == [
            (f"big{i}", NOW + (i + 1) * HOUR) for i in range(count)
        ]


def test_the_policy_file_takes_a_count_of_reservations_and_refuses_none() -> None:
    policy = read_policy('name = "deep"\nreservations = 4\n')
    assert isinstance(policy, Policy)
    assert policy.reservations == 4
    with pytest.raises(PolicyError, match="reservations"):
        read_policy('name = "none"\nreservations = 0\n')


def test_resumable_work_is_lent_a_further_reservations_gpus_and_stopped_for_its_job() -> None:
    # As above, with a resumable job of no declared end: n1's free GPUs are lent for big1
    # (ADR 0041), n2's, now set aside for big2, are lent too; it is stopped for big2 once
    # big2 could start.
    events = two_big_jobs_and_small_ones(short_runtime=HOUR)[:-2]
    events += [
        b.submitted("lent1", 2, at=NOW, resumable=True),
        b.submitted("lent2", 2, at=NOW, resumable=True),
    ]
    state = fold(*events)
    one = plan(state, NOW, DEFAULT_POLICY)
    assert [(a.job_id, a.placements[0].node_id, a.lent is True) for a in one.admissions] == [
        ("lent1", "n1", True),
        ("lent2", "n2", False),  # only n1's are set aside: n2's are free to hold
    ]
    decided = plan(state, NOW, TWO)
    assert [(a.job_id, a.placements[0].node_id, a.lent) for a in decided.admissions] == [
        ("lent1", "n1", True),
        ("lent2", "n2", True),
    ]
    apply(state, state.seq + 1, msgspec.structs.replace(b.plan(), admissions=decided.admissions))
    for job_id, node in (("lent1", "n1"), ("lent2", "n2")):
        apply(state, state.seq + 1, b.started(job_id, node, [6, 7]))
    assert plan(state, NOW + HOUR // 2, TWO).preemptions == []
    # r1 and r2 end: each big job would start were its lent job gone.
    for job_id, node in (("r1", "n1"), ("r2", "n2")):
        apply(state, state.seq + 1, b.exited(job_id, node, 0))
    later = plan(state, NOW + 2 * HOUR, TWO)
    assert [(p.job_id, p.code, p.params) for p in later.preemptions] == [
        ("lent1", "LENT", {"for": "big1"}),
        ("lent2", "LENT", {"for": "big2"}),
    ]


def test_a_remembered_further_reservation_is_found_again_when_those_before_it_change() -> None:
    # Four nodes freeing in 1-4 h; the planner's memo keeps reservations while the running
    # jobs stay. A more urgent job arrives between plans and takes the first reservation:
    # big1 and big2 must move one node on, not keep what was found before.
    events = [b.node(f"n{i}", 8) for i in range(4)]
    for i in range(4):
        events += running(f"r{i}", f"n{i}", [0, 1, 2, 3, 4, 5, 6], ends_in=(i + 1) * HOUR)
    events += [b.submitted("big1", 8, at=NOW), b.submitted("big2", 8, at=NOW)]
    state = fold(*events)
    policy = msgspec.structs.replace(DEFAULT_POLICY, reservations=3)
    memo = PlanMemo(state)
    first = plan(state, NOW, policy, memo)
    assert [r.starts_at for r in first.further] == [NOW + 2 * HOUR]
    apply(state, state.seq + 1, b.submitted("urgent", 8, tier="interactive", at=NOW))
    again = plan(state, NOW, policy, memo)
    assert again == plan(state, NOW, policy)
    assert again.reservation is not None
    assert again.reservation.job_id == "urgent"
    assert [(r.job_id, r.starts_at) for r in again.further] == [
        ("big1", NOW + 2 * HOUR),
        ("big2", NOW + 3 * HOUR),
    ]


def test_a_shape_that_found_no_reservation_is_searched_again_once_a_held_job_starts() -> None:
    # n1 runs R1 until +2 h; on n2, GPUs 0-3 are held for H (1 h), 4-7 are free. F takes
    # the first reservation (n1); A finds none. H then starts, and n2 is all free at +1 h:
    # B, of A's shape, is reserved there, so C (no declared end) may not take n2's GPUs.
    hold = Hold(job_id="H", placements=[Placement(node_id="n2", gpus=[0, 1, 2, 3])])
    state = fold(
        b.node("n1", 8),
        b.node("n2", 8),
        *running("R1", "n1", list(range(8)), ends_in=2 * HOUR),
        b.submitted("F", 8, at=NOW - 50),
        b.submitted("A", 8, at=NOW - 40),
        b.submitted("H", 4, at=NOW - 30, max_runtime_ns=HOUR),
        b.submitted("B", 8, at=NOW - 20),
        b.submitted("C", 4, at=NOW - 10),
        msgspec.structs.replace(b.plan(), holds=[hold]),
    )
    policy = Policy(order="fifo", reservations=3)
    decided = plan(state, NOW, policy)
    assert admitted(decided) == ["H"]
    assert [(r.job_id, r.starts_at) for r in decided.further] == [("B", NOW + HOUR)]
