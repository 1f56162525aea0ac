"""A reservation whose GPUs set aside would idle long for a few running jobs has them
stopped (ground STALL, ``allot.core.planning.stall``)."""

from typing import Any

import msgspec

from allot.core import DEFAULT_POLICY, State, plan
from allot.proto.codes import DRAIN, FAIR_SHARE, FUNDED, LENT, PACK, RECLAIM, TIER
from allot.proto.events import AccountDefined, AccountSettings, Event, Preemption, UsageCharged
from tests import builders as b
from tests.builders import fold

S = 10**9
MINUTE = 60 * S
HOUR = 60 * MINUTE
NOW = 100 * HOUR
WITHOUT_STALL = msgspec.structs.replace(
    DEFAULT_POLICY, grounds=(TIER, FUNDED, RECLAIM, FAIR_SHARE, DRAIN, PACK, LENT)
)


def running(
    job_id: str, node: str, gpus: list[int], ends_in: int, ran: int = HOUR, **spec: Any
) -> list[Event]:
    """A job that started ``ran`` ago and declares a runtime that ends ``ends_in`` from now."""
    start = msgspec.structs.replace(b.started(job_id, node, gpus), meta=b.meta(NOW - ran))
    return [
        b.submitted(job_id, len(gpus), max_runtime_ns=ran + ends_in, **spec),
        b.plan((job_id, node, gpus)),
        start,
    ]


def stalled(
    blocker: dict[str, Any] | None = None, gang: dict[str, Any] | None = None, *more: Event
) -> State:
    return fold(*stalling(blocker, gang, *more))


def stalling(
    blocker: dict[str, Any] | None = None, gang: dict[str, Any] | None = None, *more: Event
) -> list[Event]:
    """``gang`` (two workers of 4 GPUs, an hour declared) needs n1 and n2 whole. n1 is free;
    ``blocker`` (resumable, one GPU of n2, 10 hours left) holds the rest back: 7 GPUs are
    set aside and idle for 10 hours."""
    return [
        b.node("n1", 4),
        b.node("n2", 4),
        *more,
        *running("blocker", "n2", [0], ends_in=10 * HOUR, **{"resumable": True, **(blocker or {})}),
        b.submitted("gang", 4, workers=2, at=NOW - S, **{"max_runtime_ns": HOUR, **(gang or {})}),
    ]  # fmt: skip


def stops(state: State, policy: Any = DEFAULT_POLICY) -> list[tuple[str, str, object]]:
    decided = plan(state, NOW, policy)
    return [(p.job_id, p.code, p.params.get("for")) for p in decided.preemptions]


def test_the_job_holding_back_a_long_idle_reservation_is_stopped_and_its_gpus_held() -> None:
    state = stalled()
    before = plan(state, NOW, WITHOUT_STALL)
    assert before.preemptions == []
    assert before.reservation is not None
    assert before.reservation.starts_at == NOW + 10 * HOUR
    assert sum(len(p.gpus) for p in before.reservation.set_aside) == 7

    decided = plan(state, NOW, DEFAULT_POLICY)
    assert [(p.job_id, p.code, p.params) for p in decided.preemptions] == [
        ("blocker", "STALL", {"for": "gang"})
    ]
    held = [
        (h.job_id, sorted((p.node_id, tuple(p.gpus)) for p in h.placements)) for h in decided.holds
    ]
    assert held == [("gang", [("n1", (0, 1, 2, 3)), ("n2", (0, 1, 2, 3))])]
    assert [(w.reason.job_id, w.reason.code) for w in decided.waiting] == [("gang", "PREEMPTING")]


def test_work_that_cannot_resume_or_is_more_urgent_or_just_started_is_not_stopped() -> None:
    for blocker in ({"resumable": False}, {"tier": "interactive"}):
        assert stops(stalled(blocker)) == [], blocker
    state = stalled()
    state.jobs["blocker"].started_at = NOW - 9 * MINUTE  # under ten restarts ago
    assert stops(state) == []
    state = stalled()  # being stopped already, for another job
    state.jobs["blocker"].preemption = Preemption(job_id="blocker", code="TIER", params={})
    assert stops(state) == []


def test_nothing_is_stopped_for_a_job_that_would_run_longer_than_it_would_wait() -> None:
    # The stopped job would be back later than the reserved job would have started.
    assert stops(stalled(gang={"max_runtime_ns": 11 * HOUR})) == []
    # With no runtime declared, nobody can tell.
    assert stops(stalled(gang={"max_runtime_ns": None})) == []


def test_nothing_is_stopped_where_the_stop_costs_more_than_the_idle_gpus() -> None:
    # Fifty hours of work since its start (no checkpoints) against 7 GPUs idle for 10 hours.
    state = fold(
        b.node("n1", 4),
        b.node("n2", 4),
        *running("blocker", "n2", [0], ends_in=10 * HOUR, ran=50 * HOUR, resumable=True),
        b.submitted("gang", 4, workers=2, at=NOW - S, max_runtime_ns=HOUR),
    )
    assert stops(state) == []
    # The same job, ten times cheaper to stop (five hours run), is worth it.
    cheaper = fold(
        b.node("n1", 4),
        b.node("n2", 4),
        *running("blocker", "n2", [0], ends_in=10 * HOUR, ran=5 * HOUR, resumable=True),
        b.submitted("gang", 4, workers=2, at=NOW - S, max_runtime_ns=HOUR),
    )
    assert stops(cheaper) == [("blocker", "STALL", "gang")]


def test_nothing_is_stopped_where_fewer_gpus_idle_than_the_jobs_in_the_way_hold() -> None:
    state = fold(
        b.node("n1", 4),
        b.node("n2", 4),
        *running("blocker", "n2", [0, 1, 2], ends_in=100 * HOUR, resumable=True),
        *running("other", "n1", [0, 1], ends_in=100 * HOUR, resumable=True),
        b.submitted("gang", 4, workers=2, at=NOW - S, max_runtime_ns=HOUR),
    )
    # 3 GPUs idle, 5 held in the way: however long, most of the gang's GPUs are not idle.
    assert stops(state) == []


def test_nothing_is_stopped_where_the_reservation_starts_within_ten_restarts() -> None:
    state = fold(
        b.node("n1", 4),
        b.node("n2", 4),
        *running(
            "blocker", "n2", [0], ends_in=9 * MINUTE, resumable=True, checkpoint_interval_ns=MINUTE
        ),
        b.submitted("gang", 4, workers=2, at=NOW - S, max_runtime_ns=MINUTE),
    )
    assert stops(state) == []


def account(path: str, **settings: Any) -> AccountDefined:
    return AccountDefined(meta=b.meta(0), path=path, settings=AccountSettings(**settings))


def test_another_accounts_nominal_quota_is_its_own() -> None:
    # lab/b's one GPU is within its nominal quota of 2: not stopped (ADR 0032, P4); with
    # a nominal quota of 0 it borrows, and is.
    for quota, expected in ((2, []), (0, [("blocker", "STALL", "gang")])):
        accounts = (
            account("lab"),
            account("lab/a", quota={"gpu": 6}),
            account("lab/b", quota={"gpu": quota}),
        )
        state = stalled({"account": "lab/b"}, {"account": "lab/a"}, *accounts)
        assert stops(state) == expected, quota


def ran_before(job_id: str, account: str) -> list[Event]:
    """A 4-GPU job of ``account`` that ran on n1 for 49 hours and ended an hour ago."""
    return [
        b.submitted(job_id, 4, account=account, at=NOW - 50 * HOUR),
        b.plan((job_id, "n1", [0, 1, 2, 3])),
        msgspec.structs.replace(b.started(job_id, "n1", [0, 1, 2, 3]), meta=b.meta(NOW - 50*HOUR)),
        UsageCharged(
            meta=b.meta(NOW - HOUR), path=account, job_id=job_id, attempt=0,
            from_ns=NOW - 50 * HOUR, to_ns=NOW - HOUR, gpu_ms=4 * 49 * 3_600_000,
        ),
        msgspec.structs.replace(b.exited(job_id, "n1"), meta=b.meta(NOW - HOUR)),
    ]  # fmt: skip


def test_an_account_over_its_share_does_not_stop_the_job_of_one_that_is_not() -> None:
    state = stalled({"account": "lab/y"}, {"account": "lab/x"}, *ran_before("earlier", "lab/x"))
    assert state.usage["lab/x"].total_gpu_ms > 0
    assert stops(state) == []
    # Of an account over its share too (lab/z used nothing), it is stopped.
    accounts = [account(path) for path in ("lab", "lab/x", "lab/y", "lab/z")]
    state = stalled(
        {"account": "lab/y"}, {"account": "lab/x"}, *accounts,
        *ran_before("earlier", "lab/x"), *ran_before("before-that", "lab/y"),
    )  # fmt: skip
    assert stops(state) == [("blocker", "STALL", "gang")]


def test_gpus_lent_this_cycle_are_not_held_and_lent_work_is_stopped_the_next() -> None:
    # ``filler`` (resumable, no runtime declared) is lent one of the GPUs set aside: this
    # cycle they are not all free for the gang, so nothing is stopped yet.
    filler = b.submitted("filler", 1, resumable=True, at=NOW)
    decided = plan(fold(*stalling(), filler), NOW, DEFAULT_POLICY)
    assert [(a.job_id, a.lent) for a in decided.admissions] == [("filler", True)]
    assert decided.preemptions == []
    # Once it runs, lent a minute ago, it is in the way too, and stopped with the other.
    lent = decided.admissions[0]
    node, gpus = lent.placements[0].node_id, lent.placements[0].gpus
    started = msgspec.structs.replace(b.started("filler", node, gpus), meta=b.meta(NOW - MINUTE))
    state = fold(*stalling(), filler, b.plan(lent), started)
    assert sorted(stops(state)) == [("blocker", "STALL", "gang"), ("filler", "STALL", "gang")]


def test_a_job_given_victims_on_another_ground_this_cycle_gets_no_second_hold() -> None:
    # ``be`` (best-effort, all of n3) is stopped for the gang on TIER first: the gang is
    # held n1 and n3, and nothing is stopped on n2 for it as well.
    state = fold(
        b.node("n1", 4),
        b.node("n2", 4),
        b.node("n3", 4),
        *running("blocker", "n2", [0], ends_in=10 * HOUR, resumable=True),
        *running("be", "n3", [0, 1, 2, 3], ends_in=100 * HOUR, resumable=True, tier="best-effort"),
        b.submitted("gang", 4, workers=2, at=NOW - S, max_runtime_ns=HOUR),
    )
    decided = plan(state, NOW, DEFAULT_POLICY)
    assert [(p.job_id, p.code) for p in decided.preemptions] == [("be", "TIER")]
    assert [h.job_id for h in decided.holds] == ["gang"]


def test_another_account_is_not_stopped_past_what_it_borrows() -> None:
    # lab/b borrows one GPU: stopping one of its two jobs ends that, and the other is then
    # within its nominal quota (ADR 0032, P4): neither is stopped, since both must go.
    accounts = (
        account("lab"),
        account("lab/a", quota={"gpu": 6}),
        account("lab/b", quota={"gpu": 1}),
    )
    state = fold(
        b.node("n1", 4),
        b.node("n2", 4),
        *accounts,
        *running("b1", "n2", [0], ends_in=10 * HOUR, resumable=True, account="lab/b"),
        *running("b2", "n2", [1], ends_in=10 * HOUR, resumable=True, account="lab/b"),
        b.submitted("gang", 4, workers=2, at=NOW - S, max_runtime_ns=HOUR, account="lab/a"),
    )
    assert stops(state) == []


def test_nothing_is_stopped_for_a_job_that_quota_would_then_refuse() -> None:
    # ``late`` (lab/a, 3 GPUs) starts behind the gang this cycle, on n3: lab/a's quota of 9
    # no longer holds the gang's 8, so stopping ``blocker`` would gain it nothing (P3).
    accounts = (
        account("lab", quota={"gpu": 9}),
        account("lab/a", quota={"gpu": 9}),
        account("lab/b", quota={"gpu": 0}),
        account("other"),
    )
    state = fold(
        b.node("n1", 4),
        b.node("n2", 4),
        b.node("n3", 4),
        *accounts,
        *running("blocker", "n2", [0], ends_in=10 * HOUR, resumable=True, account="lab/b"),
        *running("fixed", "n3", [0], ends_in=50 * HOUR, account="other"),
        b.submitted("gang", 4, workers=2, at=NOW - 2 * S, max_runtime_ns=HOUR, account="lab/a"),
        b.submitted("late", 3, at=NOW - S, max_runtime_ns=50 * HOUR, account="lab/a"),
    )
    decided = plan(state, NOW, DEFAULT_POLICY)
    assert [a.job_id for a in decided.admissions] == ["late"]
    assert decided.preemptions == []
