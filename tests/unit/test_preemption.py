"""Victim selection and holds: who is stopped for whom, and that nobody else takes the GPUs."""

import itertools
from collections.abc import Iterator
from typing import Any

import msgspec
from hypothesis import example, given, settings
from hypothesis import strategies as st

from allot.core import DEFAULT_POLICY, JobStatus, PlanMemo, State, apply, plan
from allot.core.executor import Requeue, SettleLoss, due
from allot.core.model import ChangeFeed
from allot.core.placement import Capacity
from allot.core.preemption import StoppableMemo, cost_of, protected, stoppable_jobs, victim_order
from allot.core.victims import Victim, choose
from allot.proto.events import (
    AccountDefined,
    AccountSettings,
    BudgetGranted,
    Event,
    JobCancelRequested,
    JobCheckpointed,
    JobRequeued,
    NodeCordoned,
    Preemption,
    StopRequested,
    UsageCharged,
)
from tests import builders as b
from tests.builders import fold

S = 10**9
HOUR = 3600 * S
NOW = 100 * HOUR


def running(
    job_id: str, node: str, gpus: list[int], *, ran: int = HOUR, **spec: Any
) -> list[Event]:
    """A job of ``spec`` running on ``node`` since ``NOW - ran``."""
    start = msgspec.structs.replace(b.started(job_id, node, gpus), meta=b.meta(NOW - ran))
    return [b.submitted(job_id, len(gpus), **spec), b.plan((job_id, node, gpus)), start]


def checkpointed(job_id: str, ago: int, step: int = 1) -> JobCheckpointed:
    return JobCheckpointed(
        meta=b.meta(NOW - ago), job_id=job_id, node_id="n1", path="/c", step=step
    )


def test_an_interactive_job_stops_the_cheapest_batch_work_and_gets_its_gpus_held() -> None:
    state = fold(
        b.node("n1", 4),
        *running("fresh-ckpt", "n1", [0, 1], resumable=True),
        checkpointed("fresh-ckpt", ago=60 * S),
        *running("no-ckpt", "n1", [2, 3], resumable=True),
        b.submitted("notebook", 2, tier="interactive", at=NOW),
    )
    decided = plan(state, NOW, DEFAULT_POLICY)
    assert [(p.job_id, p.code, p.params) for p in decided.preemptions] == [
        ("fresh-ckpt", "TIER", {"for": "notebook"})
    ]
    assert [(h.job_id, h.placements[0].gpus) for h in decided.holds] == [("notebook", [0, 1])]
    assert decided.waiting[0].reason.code == "PREEMPTING"

    # Once the victim has stopped, its GPUs wait for the notebook, not for the batch job
    # queued before it.
    apply(
        state,
        state.seq + 1,
        msgspec.structs.replace(b.plan(), preemptions=decided.preemptions, holds=decided.holds),
    )
    events = [
        b.submitted("batch", 2, at=NOW),
        StopRequested(meta=b.meta(NOW), job_id="fresh-ckpt", grace_ns=30 * S, reason="TIER"),
        msgspec.structs.replace(b.exited("fresh-ckpt", "n1", 0), stopped_in_ns=S),
    ]
    for event in events:
        apply(state, state.seq + 1, event)
    assert state.jobs["fresh-ckpt"].status == JobStatus.PREEMPTED
    after = plan(state, NOW + S, DEFAULT_POLICY)
    assert [(a.job_id, a.placements[0].gpus) for a in after.admissions] == [("notebook", [0, 1])]
    assert after.preemptions == []


def test_a_funded_job_inside_its_minimum_runtime_is_never_stopped() -> None:
    grant = BudgetGranted(
        meta=b.meta(0), path="lab", gpu_ms=10**12, period_ns=7 * 24 * HOUR, starts_at=0
    )
    state = fold(
        b.node("n1", 2),
        grant,
        *running("protected", "n1", [0, 1], account="lab/x", min_runtime_ns=2 * HOUR),
        b.submitted("notebook", 2, tier="interactive", at=NOW),
    )
    state.jobs["protected"].funded = True  # as its admission said, had the plan funded it
    assert protected(state.jobs["protected"], NOW)
    memo = PlanMemo(state)  # it must notice the protection end, with nothing else changed
    assert plan(state, NOW, DEFAULT_POLICY).preemptions == []
    assert plan(state, NOW, DEFAULT_POLICY, memo).preemptions == []
    assert not protected(state.jobs["protected"], NOW + 2 * HOUR)
    for memo_or_none in (None, memo):
        later = plan(state, NOW + 2 * HOUR, DEFAULT_POLICY, memo_or_none)
        assert [p.job_id for p in later.preemptions] == ["protected"]


def test_a_gang_is_stopped_whole_and_only_as_much_as_the_block_needs() -> None:
    gang = b.admission("gang", ("n1", [0, 1, 2, 3]), ("n2", [0, 1, 2, 3]))
    state = fold(
        b.node("n1", 4),
        b.node("n2", 4),
        b.submitted("gang", 4, workers=2),
        b.plan(gang),
        b.started("gang", "n1", [0, 1, 2, 3]),
        b.started("gang", "n2", [0, 1, 2, 3]),
        b.submitted("notebook", 4, tier="interactive", topology="node", at=NOW),
    )
    decided = plan(state, NOW, DEFAULT_POLICY)
    assert [p.job_id for p in decided.preemptions] == ["gang"]
    assert len(decided.holds[0].placements) == 1  # one node's worth is kept for the notebook


def test_jobs_on_a_draining_node_are_stopped_once_past_their_protection() -> None:
    state = fold(
        b.node("n1", 4),
        *running("a", "n1", [0, 1], resumable=True),
        NodeCordoned(meta=b.meta(), node_id="n1", drain=True),
    )
    decided = plan(state, NOW, DEFAULT_POLICY)
    assert [(p.job_id, p.code, p.params) for p in decided.preemptions] == [
        ("a", "DRAIN", {"node": "n1"})
    ]


def test_without_grounds_nothing_is_stopped() -> None:
    state = fold(
        b.node("n1", 2),
        *running("a", "n1", [0, 1]),
        b.submitted("same-tier", 2, at=NOW),
    )
    assert plan(state, NOW, DEFAULT_POLICY).preemptions == []


# --- properties ---------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(
    jobs=st.lists(
        st.tuples(
            st.sampled_from([1, 2, 4]),  # GPUs
            st.integers(1, 600),  # minutes since its last checkpoint
            st.booleans(),  # funded, with a minimum runtime of an hour
            st.integers(10, 180),  # minutes it has run
        ),
        min_size=1,
        max_size=8,
    ),
    need=st.sampled_from([1, 2, 4, 8]),
    topology=st.sampled_from(["nvlink", "node", "any"]),
)
# Enough GPUs freed by the cheapest victims, but across two NVLink islands: the cheapest
# set that frees one island has more victims.
@example(
    jobs=[(1, 3, False, 10), (2, 4, False, 10), (2, 1, False, 10), (4, 2, False, 10),
          (1, 3, False, 11), (2, 1, True, 10), (4, 2, False, 10)],
    need=2,
    topology="nvlink",
)  # fmt: skip
def test_the_victims_cost_least_among_the_sets_that_free_the_block_and_none_is_protected(
    jobs: list[tuple[int, int, bool, int]], need: int, topology: str
) -> None:
    state = State()
    events: list[Event] = [
        b.node("n1", 8, islands=[[0, 1, 2, 3], [4, 5, 6, 7]]),
        b.node("n2", 8),
    ]
    free = {"n1": list(range(8)), "n2": list(range(8))}
    for n, (gpus, ckpt_min, _, ran_min) in enumerate(jobs):
        node = next((k for k, v in free.items() if len(v) >= gpus), None)
        if node is None:
            continue
        taken, free[node] = free[node][:gpus], free[node][gpus:]
        events += running(
            f"v{n}", node, taken, ran=ran_min * 60 * S, resumable=True, min_runtime_ns=HOUR
        )
        events.append(
            JobCheckpointed(
                meta=b.meta(NOW - ckpt_min * 60 * S),
                job_id=f"v{n}",
                node_id=node,
                path="/c",
                step=1,
            )
        )
    for seq, event in enumerate(events, start=1):
        apply(state, seq, event)
    for n, (_, _, funded, _) in enumerate(jobs):
        if f"v{n}" in state.jobs:
            state.jobs[f"v{n}"].funded = funded
    spec = b.spec(need)
    spec = msgspec.structs.replace(spec, topology=topology, tier="interactive")
    capacity = Capacity.of(state)
    pool = [
        Victim(
            job_id=j.job_id,
            placements=j.placements,
            cost=cost_of(j, NOW, 60_000),
            order=victim_order(j),
        )
        for j in state.jobs.values()
        if not protected(j, NOW)
    ]
    found = choose(capacity, spec, capacity.models, pool)
    if capacity.place(1, need, topology, capacity.models) is not None:
        return  # it fits without stopping anyone
    best = None
    for size in range(1, len(pool) + 1):
        for subset in itertools.combinations(pool, size):
            for victim in subset:
                for node_id, gpus in victim.placements.items():
                    capacity.give(node_id, gpus)
            if capacity.place(1, need, topology, capacity.models) is not None:
                cost = sum(v.cost for v in subset)
                best = cost if best is None else min(best, cost)
            for victim in subset:
                for node_id, gpus in victim.placements.items():
                    capacity.take(node_id, gpus)
    if best is None:
        assert found is None
        return
    assert found is not None
    victims, _ = found
    assert sum(v.cost for v in victims) == best
    assert not any(protected(state.jobs[v.job_id], NOW) for v in victims)


@settings(max_examples=150, deadline=None)
@given(
    jobs=st.lists(st.sampled_from([1, 2, 3, 4]), min_size=1, max_size=10),  # their GPUs
    workers=st.integers(2, 3),
    per_worker=st.sampled_from([1, 2, 4]),
)
def test_a_gang_spanning_nodes_finds_victims_exactly_when_some_set_of_them_frees_room(
    jobs: list[int], workers: int, per_worker: int
) -> None:
    state = State()
    events: list[Event] = [b.node(f"n{k}", 4) for k in range(3)]
    free = {f"n{k}": list(range(4)) for k in range(3)}
    for n, gpus in enumerate(jobs):
        node = next((k for k, v in free.items() if len(v) >= gpus), None)
        if node is not None:
            taken, free[node] = free[node][:gpus], free[node][gpus:]
            events += running(f"v{n}", node, taken, ran=(n + 1) * 600 * S)
    for seq, event in enumerate(events, start=1):
        apply(state, seq, event)
    spec = msgspec.structs.replace(b.spec(per_worker), workers=workers, topology="any")
    capacity = Capacity.of(state)
    pool = [
        Victim(
            job_id=j.job_id,
            placements=j.placements,
            cost=cost_of(j, NOW, 60_000),
            order=victim_order(j),
        )
        for j in state.jobs.values()
    ]
    found = choose(capacity, spec, capacity.models, pool)
    some_set_frees_room = False
    for size in range(len(pool) + 1):
        for subset in itertools.combinations(pool, size):
            for victim in subset:
                for node_id, gpus in victim.placements.items():
                    capacity.give(node_id, gpus)
            placed = capacity.place(workers, per_worker, "any", capacity.models)
            some_set_frees_room = some_set_frees_room or placed is not None
            for victim in subset:
                for node_id, gpus in victim.placements.items():
                    capacity.take(node_id, gpus)
    assert (found is not None) == some_set_frees_room
    if found is not None:
        victims, placements = found
        for victim in victims:
            for node_id, gpus in victim.placements.items():
                capacity.give(node_id, gpus)
        assert capacity.place(workers, per_worker, "any", capacity.models) == placements


def test_the_job_holding_the_reservation_may_still_preempt_for_it() -> None:
    state = fold(
        b.node("n1", 8),
        *running("v", "n1", [0, 1, 2, 3], resumable=True, max_runtime_ns=10 * HOUR),
        b.submitted("nb", 8, tier="interactive", at=NOW),
    )
    decided = plan(state, NOW, DEFAULT_POLICY)
    assert [p.job_id for p in decided.preemptions] == ["v"]
    assert [h.job_id for h in decided.holds] == ["nb"]  # from the next cycle on, instead


def test_funding_never_stops_a_job_of_a_higher_tier() -> None:
    grant = BudgetGranted(
        meta=b.meta(0), path="lab", gpu_ms=10**15, period_ns=700 * HOUR, starts_at=0
    )
    state = fold(
        b.node("n1", 2),
        grant,
        *running("nb", "n1", [0, 1], tier="interactive"),
        b.submitted("train", 2, account="lab/x", min_runtime_ns=HOUR, at=NOW),
    )
    assert plan(state, NOW, DEFAULT_POLICY).preemptions == []


def test_the_cost_of_a_requeued_job_counts_from_its_current_attempt() -> None:
    state = fold(b.node("n1", 2), *running("v", "n1", [0, 1], resumable=True, ran=10 * HOUR))
    for event in [
        checkpointed("v", ago=9 * HOUR),
        StopRequested(meta=b.meta(NOW - HOUR), job_id="v", grace_ns=30 * S, reason="x"),
        msgspec.structs.replace(b.exited("v", "n1", 0), meta=b.meta(NOW - HOUR), stopped_in_ns=S),
        b.preempted("v"),
        JobRequeued(meta=b.meta(NOW - HOUR), job_id="v", reason="preempted"),
        b.plan(("v", "n1", [0, 1])),
        msgspec.structs.replace(b.started("v", "n1", [0, 1]), meta=b.meta(NOW - 60 * S), attempt=1),
    ]:
        apply(state, state.seq + 1, event)
    assert state.jobs["v"].attempts == 1
    assert cost_of(state.jobs["v"], NOW, 60_000) == 2 * 60_000 + 2 * 60_000


def test_the_preemptor_requeues_an_accounted_job_even_after_a_restart_in_between() -> None:
    state = fold(
        b.node("n1", 2),
        *running("v", "n1", [0, 1], resumable=True),
        StopRequested(meta=b.meta(NOW), job_id="v", grace_ns=30 * S, reason="x"),
        msgspec.structs.replace(b.exited("v", "n1", 0), meta=b.meta(NOW + S), stopped_in_ns=S),
    )
    [account] = due(state, NOW + 2 * S)
    assert isinstance(account, SettleLoss)
    assert account.lost_gpu_ms == 2 * (HOUR + S) // 10**6  # no checkpoint: all of it
    apply(state, state.seq + 1, b.preempted("v", lost_gpu_ms=account.lost_gpu_ms))
    assert due(state, NOW + 3 * S) == [Requeue(job_id="v", attempt=0)]  # still owed
    apply(state, state.seq + 1, JobRequeued(meta=b.meta(), job_id="v", reason="preempted"))
    assert due(state, NOW + 4 * S) == []
    assert state.jobs["v"].status == JobStatus.PENDING


def test_a_gang_whose_processes_ended_on_their_own_before_the_signal_succeeds() -> None:
    gang = b.admission("g", ("n1", [0]), ("n2", [0]))
    base = [b.node("n1", 1), b.node("n2", 1), b.submitted("g", 1, workers=2), b.plan(gang)]
    stop = StopRequested(meta=b.meta(), job_id="g", grace_ns=S, reason="x")
    for first, second in (("n1", "n2"), ("n2", "n1")):
        signalled = msgspec.structs.replace(b.exited("g", first, 0), stopped_in_ns=S)
        state = fold(*base, b.started("g", "n1", [0]), b.started("g", "n2", [0]), stop,
                     signalled, b.exited("g", second, 0))  # fmt: skip
        assert state.jobs["g"].status == JobStatus.PREEMPTED  # one was stopped, in any order
    state = fold(*base, b.started("g", "n1", [0]), b.started("g", "n2", [0]), stop,
                 b.exited("g", "n1", 0), b.exited("g", "n2", 0))  # fmt: skip
    assert state.jobs["g"].status == JobStatus.SUCCEEDED


def test_a_declared_checkpoint_interval_bounds_the_work_a_stop_loses() -> None:
    state = fold(
        b.node("n1", 4),
        *running("declared", "n1", [0, 1], ran=10 * HOUR + 5 * 60 * S, resumable=True,
                 checkpoint_interval_ns=HOUR),
        *running("silent", "n1", [2, 3], ran=HOUR, resumable=True),
    )  # fmt: skip
    # 5 minutes since the last hourly checkpoint it promised; the other reported none.
    assert cost_of(state.jobs["declared"], NOW, 60_000) == 2 * 300_000 + 2 * 60_000
    assert cost_of(state.jobs["silent"], NOW, 60_000) == 2 * 3_600_000 + 2 * 60_000
    apply(state, state.seq + 1, checkpointed("declared", ago=60 * S))
    assert cost_of(state.jobs["declared"], NOW, 60_000) == 2 * 60_000 + 2 * 60_000


def test_a_lender_reclaims_with_a_job_inside_its_quota_even_behind_one_that_is_not() -> None:
    quota = {"gpu": 2}
    state = fold(
        b.node("n1", 4),
        AccountDefined(meta=b.meta(), path="lab", settings=AccountSettings()),
        AccountDefined(meta=b.meta(), path="lab/a", settings=AccountSettings(quota=quota)),
        AccountDefined(meta=b.meta(), path="lab/b", settings=AccountSettings(quota=quota)),
        *running("borrowed", "n1", [0, 1, 2, 3], account="lab/b"),  # 2 beyond its quota
        b.submitted("big", 4, account="lab/a", at=NOW - 2 * S),  # beyond a's quota: no claim
        b.submitted("small", 2, account="lab/a", at=NOW - S),
    )
    decided = plan(state, NOW, DEFAULT_POLICY)
    assert [(p.job_id, p.code, p.params) for p in decided.preemptions] == [
        ("borrowed", "RECLAIM", {"for": "small"})
    ]


def test_quota_is_reclaimed_from_a_borrower_over_its_share_before_a_cheaper_one_under_it() -> None:
    """b's job started a minute ago and is the cheapest to stop; but b, under its fair
    share, holds its GPUs because it ranked first, while c is over its share."""
    accounts = [AccountDefined(meta=b.meta(), path="lab", settings=AccountSettings())] + [
        AccountDefined(meta=b.meta(), path=f"lab/{name}",
                       settings=AccountSettings(quota={"gpu": quota}))
        for name, quota in (("a", 2), ("b", 1), ("c", 1))
    ]  # fmt: skip
    under = running("under", "n1", [0, 1], ran=60 * S, account="lab/b")  # 1 beyond its quota
    over = running("over", "n2", [0, 1], ran=10 * HOUR, account="lab/c")  # 1 beyond too
    charged = UsageCharged(
        meta=b.meta(NOW - HOUR), path="lab/c", job_id="over", attempt=0,
        from_ns=NOW - 10 * HOUR, to_ns=NOW - HOUR, gpu_ms=2 * 9 * 3_600_000,
    )  # fmt: skip
    lender = b.submitted("lender", 2, account="lab/a", at=NOW - S)
    nodes = [b.node("n1", 2), b.node("n2", 2)]

    state = fold(*nodes, *accounts, *under, *over, charged, lender)
    assert cost_of(state.jobs["under"], NOW, 60_000) < cost_of(state.jobs["over"], NOW, 60_000)
    decided = plan(state, NOW, DEFAULT_POLICY)
    assert [(p.job_id, p.code) for p in decided.preemptions] == [("over", "RECLAIM")]

    # The borrower is the account on the job's path that holds more than its quota: c,
    # over its share, though the job's own team within c is not.
    teams = [
        AccountDefined(meta=b.meta(), path=f"lab/c/{team}", settings=AccountSettings())
        for team in ("x", "y")
    ]
    ran_before = [  # y's job used n2 for 40 hours before x's started on it
        b.submitted("old", 2, account="lab/c/y", at=NOW - 60 * HOUR),
        b.plan(("old", "n2", [0, 1])),
        msgspec.structs.replace(b.started("old", "n2", [0, 1]), meta=b.meta(NOW - 60 * HOUR)),
        UsageCharged(
            meta=b.meta(NOW - 20 * HOUR), path="lab/c/y", job_id="old", attempt=0,
            from_ns=NOW - 60 * HOUR, to_ns=NOW - 20 * HOUR, gpu_ms=2 * 40 * 3_600_000,
        ),
        msgspec.structs.replace(b.exited("old", "n2"), meta=b.meta(NOW - 20 * HOUR)),
    ]  # fmt: skip
    in_team = running("over", "n2", [0, 1], ran=10 * HOUR, account="lab/c/x")
    team_charged = msgspec.structs.replace(charged, path="lab/c/x")
    state = fold(*nodes, *accounts, *teams, *ran_before, *under, *in_team, team_charged, lender)
    assert state.usage["lab/c/y"].total_gpu_ms > state.usage["lab/c/x"].total_gpu_ms > 0
    decided = plan(state, NOW, DEFAULT_POLICY)
    assert [(p.job_id, p.code) for p in decided.preemptions] == [("over", "RECLAIM")]

    # With no borrower over its share, the lender still gets its quota back, the cheapest way.
    uncharged = fold(*nodes, *accounts, *under, *over, lender)
    assert [(p.job_id, p.code) for p in plan(uncharged, NOW, DEFAULT_POLICY).preemptions] == [
        ("under", "RECLAIM")
    ]


def test_an_account_over_its_share_yields_a_resumable_job_past_its_time_slice() -> None:
    def hog_and_owed(ran: int) -> State:
        """x's resumable job has run ``ran`` and been charged for all but the last hour;
        y, with no usage, waits for the same GPUs."""
        charged = UsageCharged(
            meta=b.meta(NOW - HOUR), path="lab/x", job_id="hog", attempt=0,
            from_ns=NOW - ran, to_ns=NOW - HOUR, gpu_ms=2 * (ran - HOUR) // 10**6,
        )  # fmt: skip
        return fold(
            b.node("n1", 2),
            *running("hog", "n1", [0, 1], ran=ran, account="lab/x", resumable=True),
            charged,
            b.submitted("owed", 2, account="lab/y", at=NOW - S),
        )

    decided = plan(hog_and_owed(5 * HOUR), NOW, DEFAULT_POLICY)
    assert [(p.job_id, p.code) for p in decided.preemptions] == [("hog", "FAIR_SHARE")]
    # Inside its 4-hour slice it runs on.
    assert plan(hog_and_owed(3 * HOUR), NOW, DEFAULT_POLICY).preemptions == []


# The stoppable jobs as a planner keeps them between cycles: a random history of holders
# (funded and protected, resumable past their time slice, stopped, ended, requeued, their
# node lost) with the clock moving on by up to three hours, each step checked against the
# list worked out afresh.
MEMO_JOBS = ["a", "b", "c", "d", "e", "f"]
_minutes = st.integers(0, 180).map(lambda m: m * 60 * S)


def _runs(job_id: str, node: str, gpus: list[int], funded: bool, **spec: Any) -> list[Event]:
    admission = msgspec.structs.replace(b.admission(job_id, (node, gpus)), funded=funded)
    return [
        b.submitted(job_id, len(gpus), **spec),
        b.plan(admission),
        b.started(job_id, node, gpus),
    ]


def _preempting(job_id: str) -> list[Event]:
    chosen = Preemption(job_id=job_id, code="TIER", params={"for": "x"})
    return [msgspec.structs.replace(b.plan(), preemptions=[chosen])]


def _one(event: Event) -> list[Event]:
    return [event]


jobs_, nodes_ = st.sampled_from(MEMO_JOBS), st.sampled_from(["n1", "n2"])
runs = st.builds(
    _runs,
    jobs_,
    nodes_,
    st.sampled_from([[0], [1], [2, 3], [4, 5, 6, 7]]),
    st.booleans(),
    resumable=st.booleans(),
    min_runtime_ns=st.sampled_from([0, HOUR, 5 * HOUR]),
)
holder_steps = st.one_of(
    runs,
    runs,
    st.builds(  # admitted, not started yet
        lambda j, n, g: _runs(j, n, g, False)[:2],
        jobs_,
        nodes_,
        st.sampled_from([[0], [2, 3]]),
    ),
    st.builds(_preempting, jobs_),
    st.builds(
        lambda j: [StopRequested(meta=b.meta(), job_id=j, grace_ns=1, reason="r", attempt=0)],
        jobs_,
    ),
    st.builds(lambda j, n: [b.exited(j, n)], jobs_, nodes_),
    st.builds(lambda j: [b.preempted(j)], jobs_),
    st.builds(lambda j: [JobRequeued(meta=b.meta(), job_id=j, reason="r")], jobs_),
    st.builds(lambda j: [JobCancelRequested(meta=b.meta(), job_id=j)], jobs_),
    st.builds(lambda n: [b.lost(n)], nodes_),
    st.builds(lambda n: [b.node(n, 8)], nodes_),
)


def _history(steps: list[tuple[list[Event], int]]) -> Iterator[tuple[State, int]]:
    """Two nodes, then each step's events at the time it moved on to: the state after each."""
    state, now = fold(b.node("n1", 8), b.node("n2", 8)), 0
    for events, step in steps:
        now += step
        for event in events:
            apply(state, state.seq + 1, msgspec.structs.replace(event, meta=b.meta(now)))
        yield state, now


histories = st.lists(st.tuples(holder_steps, _minutes), max_size=30)


@settings(max_examples=300, deadline=None)
@given(histories)
def test_the_remembered_stoppable_jobs_are_those_worked_out_afresh(
    steps: list[tuple[list[Event], int]],
) -> None:
    memo = StoppableMemo()
    for state, now in _history(steps):
        kept = memo.stoppable_jobs(state, now, 60_000, 4 * HOUR)
        fresh = stoppable_jobs(state, now, 60_000, 4 * HOUR)
        assert sorted(j.job_id for j in kept.jobs) == sorted(j.job_id for j in fresh.jobs)
        assert msgspec.structs.replace(kept, jobs=[]) == msgspec.structs.replace(fresh, jobs=[])


@settings(max_examples=300, deadline=None)
@given(histories)
def test_the_remembered_free_gpus_are_those_read_afresh(
    steps: list[tuple[list[Event], int]],
) -> None:
    memo: PlanMemo | None = None
    for state, _ in _history(steps):
        memo = memo or PlanMemo(state)  # one state, changed step by step
        kept, fresh = memo.capacity(), Capacity.of(state)
        free = {
            node_id: [g.index for g in node.gpus if g.index not in node.allocated]
            for node_id, node in state.nodes.items()
            if node.schedulable
        }
        assert {n: sorted(g for i in s.islands for g in i) for n, s in kept.nodes.items()} == free
        assert kept.free_by_model == fresh.free_by_model
        assert kept.place(1, 1, "any", kept.models) == fresh.place(1, 1, "any", fresh.models)
        for node_id in list(kept.nodes):  # what a cycle changes stays its own
            kept.give(node_id, list(range(8)))


def test_a_change_feed_tells_what_changed_since_until_it_no_longer_keeps_it() -> None:
    feed = ChangeFeed()
    start = feed.end
    for key in ("a", "b", "a"):
        feed.add(key)
    assert feed.since(start) == ["a", "b", "a"]
    assert feed.since(feed.end) == []
    while feed.end < 2 * ChangeFeed.KEEP:  # as many as it keeps at most
        feed.add("x")
    assert feed.since(start) == ["a", "b", "a"] + ["x"] * (2 * ChangeFeed.KEEP - 3)
    last = feed.end
    feed.add("y")  # one more: the oldest are dropped
    assert feed.since(start) is None  # a reader that far behind reads everything again
    assert feed.since(last) == ["y"]
    assert feed.since(feed.end + 1) is None  # not a position of this feed


def test_jobs_passed_on_the_way_to_a_held_job_may_still_preempt() -> None:
    state = fold(
        b.node("n1", 4),
        *running("old-be", "n1", [0, 1], tier="best-effort"),
        *running("other-be", "n1", [2, 3], tier="best-effort"),
        b.submitted("held", 2, tier="batch", at=NOW - HOUR),
    )
    first = plan(state, NOW, DEFAULT_POLICY)
    [(victim, ground)] = [(p.job_id, p.params["for"]) for p in first.preemptions]
    assert ground == "held"
    [other] = {"old-be", "other-be"} - {victim}
    apply(
        state,
        state.seq + 1,
        msgspec.structs.replace(b.plan(), preemptions=first.preemptions, holds=first.holds),
    )
    apply(state, state.seq + 1, b.submitted("urgent", 2, tier="interactive", at=NOW))
    # No GPU is free and "held" waits for its victim: the cycle looks on past "urgent" to it,
    # and "urgent" still stops what it may, as a cycle over the whole queue decides.
    decided = plan(state, NOW + S, DEFAULT_POLICY)
    assert [(p.job_id, p.params["for"]) for p in decided.preemptions] == [(other, "urgent")]
    whole = plan(state, NOW + S, DEFAULT_POLICY, whole_queue=True)
    assert whole.preemptions == decided.preemptions


def test_a_job_that_fits_only_on_gpus_set_aside_for_another_stops_work_it_may_stop() -> None:
    # The interactive ``gang`` is reserved both nodes: ``timed`` (interactive too, so the
    # gang may not stop it) frees n1 within two hours; n1's three free GPUs are set aside.
    # The notebook fits only there: rather than wait for the gang, it stops the batch work
    # on n2, as its tier allows.
    start = msgspec.structs.replace(b.started("timed", "n1", [0]), meta=b.meta(NOW - HOUR))
    state = fold(
        b.node("n1", 4),
        b.node("n2", 4),
        b.submitted("timed", 1, tier="interactive", max_runtime_ns=3 * HOUR),
        b.plan(("timed", "n1", [0])),
        start,
        *running("batch", "n2", [0, 1, 2, 3], resumable=True, max_runtime_ns=11 * HOUR),
        b.submitted("gang", 4, workers=2, tier="interactive", at=NOW - 2 * HOUR),
        b.submitted("notebook", 1, tier="interactive", at=NOW),
    )
    decided = plan(state, NOW, DEFAULT_POLICY)
    assert decided.reservation is not None
    assert decided.reservation.job_id == "gang"
    assert [(p.job_id, p.code, p.params) for p in decided.preemptions] == [
        ("batch", "TIER", {"for": "notebook"})
    ]
    [hold] = decided.holds
    assert hold.job_id == "notebook"
    assert hold.placements[0].node_id == "n2"
