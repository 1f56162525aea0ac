"""GPUs set aside for a reservation, lent to resumable work until the reserved job can start
(ground LENT): ``Cycle.may_be_lent`` and the reclaim in ``allot.core.planning.preempt``."""

from typing import Any

import msgspec

from allot.core import DEFAULT_POLICY, State, apply, plan
from allot.proto.codes import DRAIN, FAIR_SHARE, FUNDED, PACK, RECLAIM, TIER
from allot.proto.events import (
    AccountDefined,
    AccountSettings,
    Admission,
    Event,
    Placement,
    PlanComputed,
)
from tests import builders as b
from tests.builders import fold

S = 10**9
MINUTE = 60 * S
HOUR = 60 * MINUTE
NOW = 100 * HOUR
WITHOUT_LENDING = msgspec.structs.replace(
    DEFAULT_POLICY, grounds=(TIER, FUNDED, RECLAIM, FAIR_SHARE, DRAIN, PACK)
)


def running(job_id: str, node: str, gpus: list[int], ends_in: int, **spec: Any) -> list[Event]:
    """A job that started an hour ago and declares a runtime that ends ``ends_in`` from now."""
    start = msgspec.structs.replace(b.started(job_id, node, gpus), meta=b.meta(NOW - HOUR))
    runtime = HOUR + ends_in
    return [
        b.submitted(job_id, len(gpus), max_runtime_ns=runtime, **spec),
        b.plan((job_id, node, gpus)),
        start,
    ]


def draining_for_a_gang(ends_in: int = 2 * HOUR, **filler: Any) -> State:
    """``gang`` needs n1 and n2 whole; ``timed`` frees n1 in half of ``ends_in`` and
    ``fixed`` n2 in ``ends_in``, so the gang is reserved both and n1's three free GPUs are
    set aside. ``filler`` (two GPUs, no declared runtime: it cannot backfill) waits
    behind."""
    return fold(
        b.node("n1", 4),
        b.node("n2", 4),
        *running("timed", "n1", [0], ends_in=ends_in // 2),
        *running("fixed", "n2", [0, 1, 2, 3], ends_in=ends_in),
        b.submitted("gang", 4, workers=2, at=NOW - 2),
        b.submitted("filler", 2, at=NOW - 1, **{"resumable": True, **filler}),
    )


def test_resumable_work_is_lent_the_gpus_set_aside_and_the_reservation_stands() -> None:
    state = draining_for_a_gang()
    before = plan(state, NOW, WITHOUT_LENDING)
    assert before.admissions == []
    assert [(w.reason.job_id, w.reason.code) for w in before.waiting][1] == (
        "filler",
        "RESERVED_FOR",
    )

    decided = plan(state, NOW, DEFAULT_POLICY)
    assert decided.reservation is not None
    assert decided.reservation.job_id == "gang"
    assert decided.reservation.starts_at == NOW + 2 * HOUR
    assert [(a.job_id, a.placements[0].node_id, a.lent) for a in decided.admissions] == [
        ("filler", "n1", True)
    ]


def test_work_that_cannot_resume_or_declares_a_minimum_runtime_is_not_lent() -> None:
    for filler in ({"resumable": False}, {"min_runtime_ns": HOUR}):
        decided = plan(draining_for_a_gang(**filler), NOW, DEFAULT_POLICY)
        assert decided.admissions == [], filler


def test_nothing_is_lent_when_the_reservation_starts_within_ten_restarts() -> None:
    decided = plan(draining_for_a_gang(ends_in=5 * MINUTE), NOW, DEFAULT_POLICY)
    assert decided.reservation is not None
    assert decided.reservation.starts_at == NOW + 5 * MINUTE
    assert decided.admissions == []


def test_the_reserved_job_stops_the_lent_work_once_it_could_start() -> None:
    state = draining_for_a_gang()
    decided = plan(state, NOW, DEFAULT_POLICY)
    apply(state, state.seq + 1, _recorded(decided.admissions))
    apply(state, state.seq + 1, b.started("filler", "n1", [1, 2]))
    assert state.jobs["filler"].lent

    # Until the gang could start, the lent job runs on.
    assert plan(state, NOW + MINUTE, DEFAULT_POLICY).preemptions == []

    # Its other jobs end: were the lent job gone, the gang would start now.
    for job_id, node in (("timed", "n1"), ("fixed", "n2")):
        apply(state, state.seq + 1, b.exited(job_id, node, 0))
    later = plan(state, NOW + HOUR, DEFAULT_POLICY)
    assert [(p.job_id, p.code, p.params) for p in later.preemptions] == [
        ("filler", "LENT", {"for": "gang"})
    ]
    [hold] = later.holds
    assert sorted(p.node_id for p in hold.placements) == ["n1", "n2"]
    assert [w.reason.code for w in later.waiting if w.reason.job_id == "gang"] == ["PREEMPTING"]
    # Without the ground, nothing stops it: the gang would wait for a job that never ends.
    assert plan(state, NOW + HOUR, WITHOUT_LENDING).preemptions == []


def _recorded(admissions: list[Any]) -> PlanComputed:
    return msgspec.structs.replace(b.plan(), admissions=admissions)


def test_lent_work_is_stopped_even_where_its_account_uses_no_more_than_its_own_quota() -> None:
    # The filler's account holds less than its nominal quota: no other ground would stop
    # it for another account's job, but GPUs lent were never its to keep.
    tree = [
        AccountDefined(meta=b.meta(0), path="lab", settings=AccountSettings()),
        AccountDefined(meta=b.meta(0), path="lab/a", settings=AccountSettings(quota={"gpu": 8})),
        AccountDefined(meta=b.meta(0), path="lab/b", settings=AccountSettings(quota={"gpu": 4})),
    ]
    state = fold(*tree)
    for event in (
        b.node("n1", 4),
        b.node("n2", 4),
        *running("timed", "n1", [0], ends_in=HOUR, account="lab/a"),
        *running("fixed", "n2", [0, 1, 2, 3], ends_in=2 * HOUR, account="lab/a"),
        b.submitted("gang", 4, workers=2, at=NOW - 2, account="lab/a"),
        b.submitted("filler", 2, at=NOW - 1, resumable=True, account="lab/b"),
    ):
        apply(state, state.seq + 1, event)
    decided = plan(state, NOW, DEFAULT_POLICY)
    assert [(a.job_id, a.lent) for a in decided.admissions] == [("filler", True)]
    apply(state, state.seq + 1, _recorded(decided.admissions))
    apply(state, state.seq + 1, b.started("filler", "n1", [1, 2]))
    for job_id, node in (("timed", "n1"), ("fixed", "n2")):
        apply(state, state.seq + 1, b.exited(job_id, node, 0))
    later = plan(state, NOW + HOUR, DEFAULT_POLICY)
    assert [(p.job_id, p.code) for p in later.preemptions] == [("filler", "LENT")]


def _at(event: Any, when: int) -> Any:
    return msgspec.structs.replace(event, meta=b.meta(when))


def test_lent_work_is_never_stopped_for_less_urgent_work() -> None:
    state = fold(
        b.node("n1", 4),
        b.node("n2", 4),
        b.submitted("lent", 2, resumable=True, tier="batch", at=NOW - 3 * HOUR),
        msgspec.structs.replace(
            b.plan(),
            admissions=[
                Admission(
                    job_id="lent", placements=[Placement(node_id="n1", gpus=[0, 1])], lent=True
                )
            ],
        ),
        _at(b.started("lent", "n1", [0, 1]), NOW - 2 * HOUR),
        b.submitted("spare-time", 4, workers=2, tier="best-effort", at=NOW - HOUR),
    )
    assert state.jobs["lent"].lent
    assert plan(state, NOW, DEFAULT_POLICY).preemptions == []


def test_a_job_that_would_have_started_unlent_takes_lent_gpus_back_when_not_reserved() -> None:
    # The gang was reserved n1 and n2 and ``filler`` lent n1's free GPUs. Once its other
    # jobs have ended, an interactive job that cannot start for hours ranks first and
    # takes the cycle's reservation (n3): the gang, which would start now had nothing been
    # lent, still stops the lent job.
    state = draining_for_a_gang()
    apply(state, state.seq + 1, _recorded(plan(state, NOW, DEFAULT_POLICY).admissions))
    apply(state, state.seq + 1, b.started("filler", "n1", [1, 2]))
    apply(state, state.seq + 1, b.node("n3", 8))
    for event in running("big", "n3", list(range(8)), ends_in=5 * HOUR, tier="interactive"):
        apply(state, state.seq + 1, event)
    for job_id, node in (("timed", "n1"), ("fixed", "n2")):
        apply(state, state.seq + 1, b.exited(job_id, node, 0))
    apply(state, state.seq + 1, b.submitted("urgent", 8, tier="interactive", at=NOW + HOUR))
    later = plan(state, NOW + 2 * HOUR, DEFAULT_POLICY)
    assert later.reservation is not None
    assert later.reservation.job_id == "urgent"
    assert [(p.job_id, p.code, p.params) for p in later.preemptions] == [
        ("filler", "LENT", {"for": "gang"})
    ]


def test_lent_work_of_the_reserved_jobs_own_account_is_stopped_though_quota_refuses_it() -> None:
    # lab/a may use 4 GPUs and borrow none: the lent job (2 of them) leaves ``wide`` short
    # of quota, not of room, once n1 is free.
    state = fold(
        AccountDefined(meta=b.meta(0), path="lab", settings=AccountSettings()),
        AccountDefined(
            meta=b.meta(0),
            path="lab/a",
            settings=AccountSettings(quota={"gpu": 4}, borrowing_limit={"gpu": 0}),
        ),
        AccountDefined(meta=b.meta(0), path="lab/b", settings=AccountSettings()),
        b.node("n1", 4),
        b.node("n2", 4),
        *running("timed", "n1", [0], ends_in=HOUR, account="lab/b"),
        *running("fixed", "n2", [0, 1, 2, 3], ends_in=2 * HOUR, account="lab/b"),
        b.submitted("wide", 4, topology="node", at=NOW - 2, account="lab/a"),
        b.submitted("filler", 2, resumable=True, at=NOW - 1, account="lab/a"),
    )
    decided = plan(state, NOW, DEFAULT_POLICY)
    assert [(a.job_id, a.lent) for a in decided.admissions] == [("filler", True)]
    apply(state, state.seq + 1, _recorded(decided.admissions))
    apply(state, state.seq + 1, b.started("filler", "n1", [1, 2]))
    apply(state, state.seq + 1, b.exited("timed", "n1", 0))
    later = plan(state, NOW + HOUR, DEFAULT_POLICY)
    assert [w.reason.code for w in plan(state, NOW + HOUR, WITHOUT_LENDING).waiting] == ["QUOTA"]
    assert [(p.job_id, p.code) for p in later.preemptions] == [("filler", "LENT")]
