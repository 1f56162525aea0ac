"""Moving resumable work out of the way of a job that the free GPUs fit only spread over
nodes (ground PACK, ``allot.core.planning.pack``)."""

from typing import Any

import msgspec

from allot.core import DEFAULT_POLICY, JobStatus, State, apply, plan
from allot.proto.codes import DRAIN, FAIR_SHARE, FUNDED, RECLAIM, TIER
from allot.proto.events import (
    AccountDefined,
    AccountPreemption,
    AccountSettings,
    BudgetGranted,
    Event,
    JobRequeued,
    StopRequested,
)
from tests import builders as b
from tests.builders import fold

S = 10**9
HOUR = 3600 * S
NOW = 100 * HOUR
WITHOUT_PACK = msgspec.structs.replace(
    DEFAULT_POLICY, grounds=(TIER, FUNDED, RECLAIM, FAIR_SHARE, DRAIN)
)


def running(job_id: str, node: str, gpus: list[int], **spec: Any) -> list[Event]:
    """A job of ``spec`` running on ``node`` for an hour."""
    start = msgspec.structs.replace(b.started(job_id, node, gpus), meta=b.meta(NOW - HOUR))
    return [b.submitted(job_id, len(gpus), **spec), b.plan((job_id, node, gpus)), start]


def spread_thin(small: dict[str, Any] | None = None, wide: dict[str, Any] | None = None) -> State:
    """Two nodes of 4 GPUs, 5 free between them: ``small`` runs on one GPU of n1, ``other``
    on two of n2, and ``wide`` (4 GPUs on one node) waits."""
    return fold(
        b.node("n1", 4),
        b.node("n2", 4),
        *running("small", "n1", [0], **{"resumable": True, **(small or {})}),
        *running("other", "n2", [0, 1], resumable=True),
        b.submitted("wide", 4, at=NOW, **(wide or {})),
    )


def moves(state: State, policy: Any = DEFAULT_POLICY) -> list[tuple[str, str, object]]:
    decided = plan(state, NOW, policy)
    return [(p.job_id, p.code, p.params.get("for")) for p in decided.preemptions]


def test_a_job_waiting_for_one_block_gets_a_node_once_small_work_moves_elsewhere() -> None:
    state = spread_thin()
    assert plan(state, NOW, WITHOUT_PACK).waiting[0].reason.code == "NO_BLOCK"
    assert moves(state, WITHOUT_PACK) == []

    decided = plan(state, NOW, DEFAULT_POLICY)
    # Moving ``small`` (one GPU) costs less than moving ``other`` (two).
    assert [(p.job_id, p.code, p.params) for p in decided.preemptions] == [
        ("small", "PACK", {"for": "wide"})
    ]
    assert [(h.job_id, h.placements[0].node_id, h.placements[0].gpus) for h in decided.holds] == [
        ("wide", "n1", [0, 1, 2, 3])
    ]
    assert decided.waiting[0].reason.code == "PREEMPTING"

    # Carried out: the moved job stops and is requeued; the next plan starts the waiting
    # job on the node held for it and the moved job on the GPUs free elsewhere.
    apply(
        state,
        state.seq + 1,
        msgspec.structs.replace(b.plan(), preemptions=decided.preemptions, holds=decided.holds),
    )
    for event in (
        StopRequested(meta=b.meta(NOW), job_id="small", grace_ns=30 * S, reason="PACK"),
        msgspec.structs.replace(b.exited("small", "n1", 0), stopped_in_ns=S),
        b.preempted("small"),
        JobRequeued(meta=b.meta(NOW + S), job_id="small", reason="preempted"),
    ):
        apply(state, state.seq + 1, event)
    assert state.jobs["small"].status == JobStatus.PENDING
    after = plan(state, NOW + 2 * S, DEFAULT_POLICY)
    placed = {a.job_id: [(p.node_id, p.gpus) for p in a.placements] for a in after.admissions}
    assert placed == {"wide": [("n1", [0, 1, 2, 3])], "small": [("n2", [2])]}
    assert after.preemptions == []


def test_work_that_cannot_resume_is_not_moved() -> None:
    state = fold(
        b.node("n1", 4),
        b.node("n2", 4),
        *running("small", "n1", [0], resumable=False),
        *running("other", "n2", [0, 1], resumable=False),
        b.submitted("wide", 4, at=NOW),
    )
    assert moves(state) == []
    assert plan(state, NOW, DEFAULT_POLICY).waiting[0].reason.code == "NO_BLOCK"


def test_work_is_moved_only_where_it_can_start_again_at_once() -> None:
    # n1's two-GPU job would need two GPUs together elsewhere: n2 and n3 have one each.
    state = fold(
        b.node("n1", 4),
        b.node("n2", 4),
        b.node("n3", 4),
        *running("pair", "n1", [0, 1], resumable=True),
        *running("three", "n2", [0, 1, 2], resumable=False),
        *running("also-three", "n3", [0, 1, 2], resumable=False),
        b.submitted("wide", 4, at=NOW),
    )
    assert plan(state, NOW, DEFAULT_POLICY).waiting[0].reason.code == "NO_BLOCK"
    assert moves(state) == []


def test_more_urgent_work_is_not_moved_for_less_urgent_work() -> None:
    state = spread_thin(small={"tier": "interactive"}, wide={"tier": "batch"})
    # ``other`` (batch, like the waiting job) may still be moved instead.
    assert moves(state) == [("other", "PACK", "wide")]
    state = spread_thin(small={"tier": "batch"}, wide={"tier": "best-effort"})
    assert moves(state) == []


def test_funded_work_inside_its_minimum_runtime_is_not_moved() -> None:
    grant = BudgetGranted(
        meta=b.meta(0), path="lab", gpu_ms=10**12, period_ns=7 * 24 * HOUR, starts_at=0
    )
    state = spread_thin(small={"min_runtime_ns": 2 * HOUR})
    apply(state, state.seq + 1, grant)
    state.jobs["small"].funded = True  # as its admission said, had the plan funded it
    # The other job is moved instead, though it costs more.
    assert moves(state) == [("other", "PACK", "wide")]


def test_a_gang_that_spreads_gets_as_many_nodes_as_its_workers_lack() -> None:
    state = fold(
        b.node("n1", 4),
        b.node("n2", 4),
        b.node("n3", 4),
        *running("small", "n1", [0], resumable=True),
        *running("small2", "n2", [0], resumable=True),
        *running("fixed", "n3", [0, 1], resumable=False),
        b.submitted("gang", 4, workers=2, at=NOW),
    )
    assert plan(state, NOW, WITHOUT_PACK).waiting[0].reason.code == "NO_BLOCK"
    decided = plan(state, NOW, DEFAULT_POLICY)
    assert sorted((p.job_id, p.code) for p in decided.preemptions) == [
        ("small", "PACK"),
        ("small2", "PACK"),
    ]
    [hold] = decided.holds
    assert sorted((p.node_id, p.gpus) for p in hold.placements) == [
        ("n1", [0, 1, 2, 3]),
        ("n2", [0, 1, 2, 3]),
    ]


def test_a_node_the_reservation_counts_on_is_not_emptied_for_another_job() -> None:
    # ``gang`` (two whole nodes, ahead in the queue) is reserved n1 and n2, which ``timed``,
    # then ``a`` and ``b`` free by their declared runtimes. ``wide`` behind it could have n2
    # emptied (``a`` and ``b`` would start again on n3 and n4), but work started there
    # could outlast the reservation's estimate.
    state = fold(
        b.node("n1", 4),
        b.node("n2", 4),
        b.node("n3", 4),
        b.node("n4", 4),
        *running("timed", "n1", [0], resumable=False, max_runtime_ns=2 * HOUR),
        *running("a", "n2", [0, 1], resumable=True, max_runtime_ns=3 * HOUR),
        *running("b", "n2", [2, 3], resumable=True, max_runtime_ns=3 * HOUR),
        *running("fixed", "n3", [0], resumable=False),
        *running("fixed2", "n4", [0, 1], resumable=False),
        b.submitted("gang", 4, workers=2, at=NOW - 1),
        b.submitted("wide", 4, at=NOW),
    )
    decided = plan(state, NOW, DEFAULT_POLICY)
    reservation = decided.reservation
    assert reservation is not None
    assert reservation.job_id == "gang"
    assert sorted(p.node_id for p in reservation.placements) == ["n1", "n2"]
    assert [w.reason.job_id for w in decided.waiting] == ["gang", "wide"]
    assert decided.preemptions == []


def test_moved_work_is_not_given_the_gpus_set_aside_for_the_job_it_moves_for() -> None:
    # ``wide`` is reserved n3 (``timed`` frees it within two hours); n3's three free GPUs
    # are set aside. Emptying n1 for it now would leave ``small`` only those GPUs, which
    # go to ``three`` (waiting for them) once ``wide`` starts on n1.
    state = fold(
        b.node("n1", 4),
        b.node("n2", 4),
        b.node("n3", 4),
        *running("small", "n1", [0, 1], resumable=True),
        *running("fixed", "n2", [0, 1, 2, 3], resumable=False),
        *running("timed", "n3", [0], resumable=False, max_runtime_ns=3 * HOUR),
        b.submitted("wide", 4, topology="node", at=NOW - 20 * HOUR),
        b.submitted("three", 3, at=NOW - 10 * HOUR),
    )
    decided = plan(state, NOW, DEFAULT_POLICY)
    assert decided.reservation is not None
    assert decided.reservation.job_id == "wide"
    assert moves(state) == []


def account(path: str, **settings: Any) -> AccountDefined:
    return AccountDefined(meta=b.meta(0), path=path, settings=AccountSettings(**settings))


def test_the_accounts_preemption_rules_hold_for_moves_too() -> None:
    never = AccountPreemption(
        within_account="never", borrow_within_cohort="never", reclaim_within_cohort="never"
    )
    # (a) lab/a lets its waiting jobs stop none of its own; (b) a borrowing job of lab/a
    # stops nothing in the cohort, and lab/b is within its nominal quota.
    for owner in ("lab/a", "lab/b"):
        state = fold(
            account("lab"),
            account("lab/a", quota={"gpu": 4}, preemption=never),
            account("lab/b", quota={"gpu": 4}),
            b.node("n1", 4),
            b.node("n2", 4),
            *running("small", "n1", [0], resumable=True, account=owner),
            *running("other", "n2", [0, 1], resumable=False, account="lab/a"),
            b.submitted("wide", 4, topology="node", at=NOW, account="lab/a"),
        )
        assert plan(state, NOW, DEFAULT_POLICY).waiting[0].reason.code == "NO_BLOCK"
        assert moves(state) == [], owner


def test_a_job_just_started_is_not_moved() -> None:
    state = spread_thin()
    state.jobs["small"].started_at = NOW - 9 * 60 * S  # under ten restarts ago
    assert moves(state) == [("other", "PACK", "wide")]


def test_a_gang_is_packed_for_on_one_gpu_model() -> None:
    # A gang's workers all go on one model: the empty H100 node is no help to a gang that
    # needs two, so two A100 nodes are emptied.
    state = fold(
        b.node("n1", 4, model="A100"),
        b.node("n2", 4, model="A100"),
        b.node("n3", 4, model="A100"),
        b.node("n4", 4, model="H100"),
        *running("s1", "n1", [0], resumable=True),
        *running("s2", "n2", [0], resumable=True),
        *running("s3", "n3", [0], resumable=True),
        b.submitted("gang", 4, workers=2, at=NOW),
    )
    assert plan(state, NOW, WITHOUT_PACK).waiting[0].reason.code == "NO_BLOCK"
    assert len(moves(state)) == 2
