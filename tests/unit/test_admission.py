"""The admission cycle: quotas, reservation and backfill, reasons, elastic growth."""

from typing import Any

import msgspec
from hypothesis import example, given, settings
from hypothesis import strategies as st

from allot.core import DEFAULT_POLICY, PlanMemo, Policy, apply, plan
from allot.core.maxwait import overdue
from allot.core.placement import Capacity
from allot.core.planning import Plan
from allot.proto.events import (
    AccountDefined,
    AccountSettings,
    BudgetGranted,
    Event,
    Hold,
    MaxWaitExceeded,
    NodeCordoned,
    NodeLost,
    PendingReason,
    Placement,
)
from tests import builders as b
from tests.builders import fold

HOUR = 3600 * 10**9
NOW = 10 * HOUR


def running(
    job_id: str, node: str, gpus: list[int], *, ends_in: int | None, **spec: Any
) -> list[Event]:
    """A job that started at ``NOW - 1h`` and declared it ends ``ends_in`` after ``NOW``."""
    runtime = None if ends_in is None else HOUR + ends_in
    start = msgspec.structs.replace(b.started(job_id, node, gpus), meta=b.meta(NOW - HOUR))
    return [
        b.submitted(job_id, len(gpus), max_runtime_ns=runtime, **spec),
        b.plan((job_id, node, gpus)),
        start,
    ]


def account(path: str, **settings: Any) -> AccountDefined:
    return AccountDefined(meta=b.meta(), path=path, settings=AccountSettings(**settings))


def reasons(decided: Plan) -> dict[str, tuple[str, dict[str, int | str]]]:
    return {w.reason.job_id: (w.reason.code, w.reason.params) for w in decided.waiting}


def test_the_head_job_holds_gpus_and_only_work_that_ends_first_may_use_them() -> None:
    state = fold(
        b.node("n1", 8),
        *running("r", "n1", [0, 1, 2, 3, 4, 5], ends_in=HOUR),
        b.submitted("big", 8, at=NOW),
        b.submitted("long", 2, at=NOW),  # no declared end: would delay big
        b.submitted("short", 2, at=NOW, max_runtime_ns=HOUR // 2),
    )
    decided = plan(state, NOW, DEFAULT_POLICY, whole_queue=True)
    assert [a.job_id for a in decided.admissions] == ["short"]
    assert decided.reservation is not None
    assert decided.reservation.job_id == "big"
    assert decided.reservation.starts_at == NOW + HOUR
    assert reasons(decided)["long"] == ("RESERVED_FOR", {"job": "big"})
    big = next(w for w in decided.waiting if w.reason.job_id == "big")
    assert big.detail["estimated_start"] == NOW + HOUR


def test_without_backfill_the_gpus_go_in_order_and_nothing_is_held() -> None:
    state = fold(
        b.node("n1", 8),
        *running("r", "n1", [0, 1, 2, 3, 4, 5], ends_in=HOUR),
        b.submitted("big", 8, at=NOW),
        b.submitted("long", 2, at=NOW),
    )
    no_backfill = msgspec.structs.replace(DEFAULT_POLICY, backfill=False)
    decided = plan(state, NOW, no_backfill)
    assert [a.job_id for a in decided.admissions] == ["long"]
    assert decided.reservation is None


def test_a_small_higher_ranked_job_is_not_stuck_behind_a_big_one() -> None:
    state = fold(
        b.node("n1", 8),
        *running("r", "n1", [0, 1, 2, 3], ends_in=None),
        b.submitted("big", 8, at=NOW),
        b.submitted("small", 4, at=NOW, tier="interactive"),
    )
    decided = plan(state, NOW, DEFAULT_POLICY, whole_queue=True)
    assert [a.job_id for a in decided.admissions] == ["small"]
    # Only 4 are free and r declares no end: no estimate, so nothing is held for big.
    assert reasons(decided)["big"] == ("NO_FIT", {"need": 8})
    assert decided.reservation is None


def test_a_gang_waits_for_a_block_not_the_scattered_sum() -> None:
    state = fold(
        b.node("a", 8, rack="r1"),
        b.node("b", 8, rack="r1"),
        b.node("c", 8, rack="r2"),
        *running("r", "a", [0, 1, 2, 3], ends_in=None),
        b.submitted("gang", 8, workers=2, topology="rack", at=NOW),
    )
    decided = plan(state, NOW, DEFAULT_POLICY)
    assert decided.admissions == []
    waiting = decided.waiting[0]
    assert (waiting.reason.code, waiting.reason.params) == (
        "NO_BLOCK",
        {"need": 16, "topology": "rack"},
    )
    assert waiting.detail["largest"] == 8  # one 8-GPU worker fits in r1 beside r, one in r2


def test_quota_with_a_borrowing_limit_and_a_lender_that_keeps_part_of_its_quota() -> None:
    state = fold(
        b.node("n1", 8),
        b.node("n2", 8),
        account("lab", quota={"gpu": 8}),
        account("lab/a", quota={"gpu": 4}, borrowing_limit={"gpu": 2}),
        account("lab/b", quota={"gpu": 4}, lending_limit={"gpu": 1}),
        b.submitted("a1", 4, account="lab/a", at=NOW),
        b.submitted("a2", 2, account="lab/a", at=NOW),
        b.submitted("a3", 1, account="lab/a", at=NOW),
        b.submitted("b1", 3, account="lab/b", at=NOW),
    )
    decided = plan(state, NOW, DEFAULT_POLICY)
    # a may borrow 2, but of b's 4 only 1 is lendable: lab's 8 minus b's 3 kept leaves 5
    # for a, so a2 waits and a3 (1 GPU) after it still fits.
    assert sorted(a.job_id for a in decided.admissions) == ["a1", "a3", "b1"]
    assert reasons(decided)["a2"] == ("QUOTA", {"account": "lab/a", "resource": "gpu", "need": 2})
    a2 = next(w for w in decided.waiting if w.reason.job_id == "a2")
    assert a2.detail == {"available": 1}


def test_a_cycle_charges_its_admissions_to_its_own_copy_of_quota_use() -> None:
    state = fold(
        b.node("n1", 8),
        account("lab", quota={"gpu": 8}),
        account("lab/a", quota={"gpu": 4}, borrowing_limit={"gpu": 0}),
        *running("r", "n1", [0, 1], ends_in=HOUR, account="lab/a"),
        b.submitted("j", 2, account="lab/a", at=NOW),
        b.submitted("k", 1, account="lab/a", at=NOW),
    )
    held = msgspec.json.encode(state.quota_used)
    decided = plan(state, NOW, DEFAULT_POLICY)
    assert [a.job_id for a in decided.admissions] == ["j"]  # then lab/a is at its quota
    assert reasons(decided)["k"][0] == "QUOTA"
    assert msgspec.json.encode(state.quota_used) == held


def test_past_the_depth_a_job_kept_to_some_models_starts_where_a_held_job_left_room() -> None:
    # y's quota keeps it off model B. J1 finds no room for its shape anywhere; H, for which
    # n1 [0, 1] are held, starts on n0 instead and leaves them free: J3, past the depth and
    # of J1's shape but allowed model A only, takes them.
    hold = msgspec.structs.replace(
        b.plan(), holds=[Hold(job_id="H", placements=[Placement(node_id="n1", gpus=[0, 1])])]
    )
    state = fold(
        account("x"),
        account("y", quota={"gpu:B": 0}, borrowing_limit={"gpu:B": 0}),
        b.node("n0", 2, model="B", islands=[[0], [1]]),
        b.node("n1", 4, model="A"),
        b.submitted("R", 2, account="x"),
        b.plan(("R", "n1", [2, 3])),
        b.submitted("J1", 2, account="x", topology="nvlink"),
        b.submitted("H", 2, account="x"),
        b.submitted("J3", 2, account="y", topology="nvlink"),
        hold,
    )
    policy = Policy(order="fifo", queue_depth=2, backfill=False, preemption=False)
    for memo in (None, PlanMemo(state)):
        decided = plan(state, NOW, policy, memo)
        placed = {a.job_id: [(p.node_id, p.gpus) for p in a.placements] for a in decided.admissions}
        assert placed == {"H": [("n0", [0, 1])], "J3": [("n1", [0, 1])]}


def test_a_flavor_found_only_on_cordoned_nodes_waits_for_them() -> None:
    state = fold(
        b.node("a", 8, model="A100"),
        b.node("h", 8, model="H100"),
        NodeCordoned(meta=b.meta(), node_id="h"),
        b.submitted("j", 1, flavor="H100", at=NOW),
    )
    decided = plan(state, NOW, DEFAULT_POLICY)
    assert reasons(decided)["j"] == ("NODE_CORDONED", {"flavor": "H100"})


def test_elastic_jobs_start_at_their_minimum_and_grow_into_what_is_left() -> None:
    state = fold(
        b.node("n1", 8),
        b.submitted("e", 2, max_gpus=8, at=NOW),
        b.submitted("j", 4, at=NOW),
    )
    decided = plan(state, NOW, DEFAULT_POLICY)
    placed = {a.job_id: sum(len(p.gpus) for p in a.placements) for a in decided.admissions}
    assert placed == {"e": 4, "j": 4}
    apply(state, state.seq + 1, msgspec.structs.replace(b.plan(), admissions=decided.admissions))
    assert state.ignored_count == 0
    assert state.jobs["e"].gpu_count == 4


# --- properties ---------------------------------------------------------------------------

job_shapes = st.tuples(
    st.integers(1, 3),  # workers; 0: one elastic worker
    st.sampled_from([1, 2, 4, 8]),  # GPUs per worker
    st.sampled_from(["nvlink", "node", "rack", "any"]),
    st.sampled_from(["interactive", "batch", "best-effort"]),
    st.one_of(st.none(), st.integers(1, 6)),  # max runtime, hours
    st.booleans(),  # elastic (one worker, up to twice its GPUs)
)


def scenario(
    nodes: list[tuple[int, str]],
    held: list[tuple[int, int | None]],
    queued: list[tuple[int, int, str, str, int | None, bool]],
    quotas: bool,
) -> list[Event]:
    events: list[Event] = [b.node(f"n{i}", g, rack=rack) for i, (g, rack) in enumerate(nodes)]
    if quotas:
        events += [
            account("a", quota={"gpu": 8}, borrowing_limit={"gpu": 4}),
            account("b", quota={"gpu": 8}, lending_limit={"gpu": 4}),
        ]
    free = {f"n{i}": list(range(g)) for i, (g, _) in enumerate(nodes)}
    for n, (count, hours) in enumerate(held):  # running jobs, placed on the first room
        node = next((k for k, v in free.items() if len(v) >= count), None)
        if node is None:
            continue
        gpus, free[node] = free[node][:count], free[node][count:]
        ends = None if hours is None else hours * HOUR
        events += running(f"r{n}", node, gpus, ends_in=ends, account="a" if n % 2 else "b")
    for n, (workers, gpus, topology, tier, hours, elastic) in enumerate(queued):
        events.append(
            b.submitted(
                f"q{n}", gpus, workers=1 if elastic else workers, topology=topology, tier=tier,
                at=NOW, max_runtime_ns=None if hours is None else hours * HOUR,
                account="a" if n % 3 else "b", max_gpus=2 * gpus if elastic else None,
            )
        )  # fmt: skip
    return events


cluster = st.lists(
    st.tuples(st.sampled_from([4, 8]), st.sampled_from(["r1", "r2"])), min_size=1, max_size=6
)
holders = st.lists(
    st.tuples(st.integers(1, 8), st.one_of(st.none(), st.integers(1, 5))), max_size=8
)


@settings(max_examples=160, deadline=None)
@given(cluster, holders, st.lists(job_shapes, max_size=14), st.booleans(), st.sampled_from([1, 3]))
# A job ahead of the reserved gang, put back as it would borrow, takes a GPU set aside for
# the gang and holds it with no declared end: the reservation cannot stand.
@example(
    nodes=[(4, "r1"), (4, "r1"), (8, "r1"), (8, "r1")],
    held=[(8, 1)],
    queued=[(1, 1, "nvlink", "interactive", None, False)] * 12
    + [(2, 8, "rack", "interactive", None, False)],
    quotas=True,
    reservations=1,
)
# The same, with a further reservation: the first is made again where it can be now, and
# the further one after it, not on GPUs the first now counts on.
@example(
    nodes=[(4, "r1"), (8, "r1"), (8, "r1")],
    held=[(1, None), (4, 1), (1, None), (2, None), (5, 1), (1, None)],
    queued=[(1, 1, "nvlink", "interactive", None, False)] * 9
    + [(1, 8, "nvlink", "interactive", None, False)]
    + [(1, 1, "nvlink", "interactive", None, False)] * 2
    + [(1, 4, "nvlink", "interactive", None, False)],
    quotas=True,
    reservations=2,
)
def test_plans_are_sound_and_leave_no_fitting_job_waiting(
    nodes: list[tuple[int, str]],
    held: list[tuple[int, int | None]],
    queued: list[tuple[int, int, str, str, int | None, bool]],
    quotas: bool,
    reservations: int,
) -> None:
    state = fold(*scenario(nodes, held, queued, quotas))
    policy = msgspec.structs.replace(DEFAULT_POLICY, reservations=reservations)
    decided = plan(state, NOW, policy, whole_queue=True)
    # A cycle that stops once no GPU is left decides the same; it states fewer reasons.
    stopped_early = plan(state, NOW, policy)
    for field in ("admissions", "preemptions", "holds"):
        assert getattr(stopped_early, field) == getattr(decided, field)
    assert all(w in decided.waiting for w in stopped_early.waiting)
    # Every admission applies: free GPUs only, gangs whole, each worker on one node.
    before = state.ignored_count
    apply(state, state.seq + 1, msgspec.structs.replace(b.plan(), admissions=decided.admissions))
    assert state.ignored_count == before
    assert {w.reason.job_id for w in decided.waiting} == set(state.pending)

    # No head-of-line blocking: what waits for room does not fit in what is left, held
    # GPUs aside; what waits for held GPUs fits only with them.
    left = Capacity.of(state)
    reserved = [decided.reservation, *decided.further] if decided.reservation else []
    assert len(reserved) <= reservations
    held_gpus = [p for r in reserved for p in r.set_aside]
    held_gpus += [p for hold in decided.holds for p in hold.placements]  # kept for preemptors
    for placement in held_gpus:
        left.take(placement.node_id, placement.gpus)
    for waiting in decided.waiting:
        spec = state.jobs[waiting.reason.job_id].spec
        if waiting.reason.code in ("NO_FIT", "NO_BLOCK", "BEHIND", "RESERVED_FOR"):
            assert left.place(spec.workers, spec.gpus, spec.topology, left.models) is None

    # Backfill never delays a reservation: each GPU it will take is free by then, by the
    # declared runtimes of whatever holds it now; and no two reservations count on one GPU.
    counted_on = [(p.node_id, g) for r in reserved for p in r.placements for g in p.gpus]
    assert len(counted_on) == len(set(counted_on))
    for reservation in reserved:
        starts = reservation.starts_at
        for placement in reservation.placements:
            node = state.nodes[placement.node_id]
            for index in placement.gpus:
                holder = node.allocated.get(index)
                if holder is None:
                    continue
                job = state.jobs[holder]
                assert job.spec.max_runtime_ns is not None
                began = job.started_at if job.started_at is not None else NOW
                assert max(NOW, began + job.spec.max_runtime_ns) <= starts


@settings(max_examples=80, deadline=None)
@given(cluster, holders, st.lists(job_shapes, max_size=14))
def test_quota_is_never_exceeded_beyond_the_borrowing_limit_nor_into_kept_quota(
    nodes: list[tuple[int, str]],
    held: list[tuple[int, int | None]],
    queued: list[tuple[int, int, str, str, int | None, bool]],
) -> None:
    state = fold(*scenario(nodes, [], queued, quotas=True))
    for _ in range(3):  # a few cycles, each on the outcome of the last
        decided = plan(state, NOW, DEFAULT_POLICY)
        apply(
            state, state.seq + 1, msgspec.structs.replace(b.plan(), admissions=decided.admissions)
        )
    used = {"a": 0, "b": 0}
    for node in state.nodes.values():
        for job_id in node.allocated.values():
            used[state.jobs[job_id].spec.account] += 1
    capacity = sum(len(n.gpus) for n in state.nodes.values())
    assert used["a"] <= 8 + 4
    # b keeps 4 of its quota for itself: a never takes so much that b could not have it.
    assert used["a"] + max(used["b"], 4) <= max(capacity, used["a"] + used["b"])


@settings(max_examples=60, deadline=None)
@given(cluster, holders, st.lists(job_shapes, max_size=14), st.randoms(use_true_random=False))
def test_the_plan_is_byte_identical_for_the_same_snapshot_in_any_node_order(
    nodes: list[tuple[int, str]],
    held: list[tuple[int, int | None]],
    queued: list[tuple[int, int, str, str, int | None, bool]],
    order: Any,
) -> None:
    events = scenario(nodes, held, queued, quotas=True)
    first = plan(fold(*events), NOW, DEFAULT_POLICY)
    state = fold(*events)
    # The nodes and the queue as the fold holds them, in any order: what the log says
    # (when each node registered, when each job was submitted) decides, not a listing.
    listed = list(state.nodes.items())
    order.shuffle(listed)
    state.nodes = dict(listed)
    waiting = list(state.pending)
    order.shuffle(waiting)
    state.pending = dict.fromkeys(waiting)
    second = plan(state, NOW, DEFAULT_POLICY)
    assert msgspec.json.encode(first) == msgspec.json.encode(second)


def test_reasons_are_recorded_only_when_they_change() -> None:
    state = fold(b.node("n1", 2), b.submitted("j", 4, at=NOW))
    decided = plan(state, NOW, DEFAULT_POLICY)
    assert decided.pending == [PendingReason(job_id="j", code="NO_FIT", params={"need": 4})]
    apply(state, state.seq + 1, msgspec.structs.replace(b.plan(), pending=decided.pending))
    assert plan(state, NOW + HOUR, DEFAULT_POLICY).empty


def test_jobs_past_their_accounts_max_wait_are_overdue_once_per_attempt() -> None:
    state = fold(
        account("lab", max_wait_ns=HOUR),
        account("lab/a"),
        account("lab/b", max_wait_ns=3 * HOUR),
        b.submitted("a", account="lab/a", at=NOW - 2 * HOUR),
        b.submitted("b", account="lab/b", at=NOW - 2 * HOUR),
    )
    late = overdue(state, NOW)
    assert [(o.job_id, o.account, o.waited_ns) for o in late] == [("a", "lab", 2 * HOUR)]
    apply(state, state.seq + 1, MaxWaitExceeded(meta=b.meta(), **msgspec.structs.asdict(late[0])))
    assert overdue(state, NOW) == []
    assert [o.job_id for o in overdue(state, NOW + 2 * HOUR)] == ["b"]


def test_work_of_an_account_whose_budget_ran_out_goes_after_everyone_elses() -> None:
    state = fold(
        b.node("n1", 1),
        BudgetGranted(meta=b.meta(), path="spent", gpu_ms=0, period_ns=24 * HOUR, starts_at=0),
        b.submitted("first", account="spent", at=NOW - HOUR),
        b.submitted("second", account="fresh", at=NOW),
        b.submitted("third", account="spent", at=NOW),
    )
    decided = plan(state, NOW, DEFAULT_POLICY, whole_queue=True)
    assert [a.job_id for a in decided.admissions] == ["second"]
    assert reasons(decided)["first"] == ("BUDGET_EXHAUSTED", {"account": "spent"})


def test_with_quotas_a_job_short_of_room_still_gets_the_reservation() -> None:
    state = fold(
        b.node("n1", 8),
        account("a", quota={"gpu": 16}),
        account("b", quota={"gpu": 16}),
        *running("r", "n1", [0, 1, 2, 3, 4, 5], ends_in=HOUR, account="b"),
        b.submitted("big", 8, account="a", at=NOW),
        b.submitted("long", 2, account="b", at=NOW),
    )
    decided = plan(state, NOW, DEFAULT_POLICY, whole_queue=True)
    assert decided.admissions == []
    assert reasons(decided) == {
        "big": ("NO_FIT", {"need": 8}),
        "long": ("RESERVED_FOR", {"job": "big"}),
    }


def test_quota_kept_by_a_lender_is_refused_as_quota_and_cordoned_work_still_counts() -> None:
    state = fold(
        b.node("n1", 8),
        b.node("n2", 8),
        account("a", quota={"gpu": 8}),
        account("b", quota={"gpu": 8}, lending_limit={"gpu": 0}),
        *running("r", "n1", list(range(8)), ends_in=None, account="a"),
        NodeCordoned(meta=b.meta(), node_id="n1"),
        b.submitted("a2", 4, account="a", at=NOW),
    )
    decided = plan(state, NOW, DEFAULT_POLICY)
    # b keeps all 8 of its quota, idle on n2: a, already at 8 (on the cordoned node), may
    # not take it.
    assert decided.admissions == []
    assert reasons(decided)["a2"] == ("QUOTA", {"account": "a", "resource": "gpu", "need": 4})


def test_a_borrowing_limit_binds_even_where_no_sibling_declares_a_quota() -> None:
    state = fold(
        b.node("n1", 8),
        account("lab", borrowing_limit={"gpu": 2}),
        b.submitted("j", 6, account="lab", at=NOW),
        b.submitted("k", 2, account="lab", at=NOW),
    )
    decided = plan(state, NOW, DEFAULT_POLICY)
    assert [a.job_id for a in decided.admissions] == ["k"]
    assert reasons(decided)["j"] == ("QUOTA", {"account": "lab", "resource": "gpu", "need": 6})


def test_a_refusal_remembered_for_room_gives_way_to_quota_once_quota_binds() -> None:
    state = fold(
        account("b", quota={"gpu": 8}, borrowing_limit={"gpu": 0}),
        b.node("n1", 4),
        b.node("n2", 4),
        b.submitted("x", 3, workers=2, topology="node", account="b", at=NOW),
        b.submitted("y", 4, account="b", at=NOW + 1),
        b.submitted("z", 3, workers=2, topology="node", account="b", at=NOW + 2),
    )
    decided = plan(state, NOW + 10, DEFAULT_POLICY)
    assert [a.job_id for a in decided.admissions] == ["y"]
    assert reasons(decided)["x"][0] == "NO_BLOCK"
    assert reasons(decided)["z"] == ("QUOTA", {"account": "b", "resource": "gpu", "need": 6})


def test_elastic_growth_is_any_count_and_stays_in_its_nvlink_island() -> None:
    state = fold(
        b.node("n1", 8, islands=[[0, 1, 2, 3], [4, 5, 6, 7]]),
        b.node("n2", 4, islands=[]),  # no NVLink
        b.submitted("linked", 2, max_gpus=8, topology="nvlink", at=NOW),
        b.submitted("odd", 2, max_gpus=3, at=NOW),
    )
    decided = plan(state, NOW, DEFAULT_POLICY)
    placed = {a.job_id: (a.placements[0].node_id, a.placements[0].gpus) for a in decided.admissions}
    assert placed == {"linked": ("n1", [0, 1, 2, 3]), "odd": ("n2", [0, 1, 2])}
    apply(state, state.seq + 1, msgspec.structs.replace(b.plan(), admissions=decided.admissions))
    assert state.ignored_count == 0


def test_a_plan_memo_sees_new_quotas_and_lost_nodes() -> None:
    # The memo keeps the quota frame (cohorts, what the cluster has) between cycles; it
    # must notice accounts and nodes changing, or it admits what quota now refuses.
    state = fold(b.node("n1", 4), b.node("n2", 4), account("lab"))
    memo, policy = PlanMemo(state), DEFAULT_POLICY
    apply(state, state.seq + 1, b.submitted("j", 4, account="lab/a", at=NOW))
    outcomes = [bool(plan(state, NOW, policy, memo).admissions)]  # no quotas yet
    for event in [
        NodeLost(meta=b.meta(), node_id="n2", last_seen_ns=0, timeout_ns=1),
        account("lab/a", quota={"gpu": 4}),
        # b keeps its 4 GPUs, so a may have only what the cluster has beyond them.
        account("lab/b", quota={"gpu": 4}, lending_limit={"gpu": 0}),
        b.node("n2", 4),  # back: 4 more GPUs beyond b's
    ]:
        apply(state, state.seq + 1, event)
        remembered = plan(state, NOW, policy, memo)
        assert remembered == plan(state, NOW, policy)
        outcomes.append(bool(remembered.admissions))
    assert outcomes == [True, True, True, False, True]


@settings(max_examples=150, deadline=None)
@given(
    cluster,
    st.lists(st.tuples(st.integers(1, 8), st.integers(1, 6)), min_size=1, max_size=10),
    st.integers(1, 3),
    st.integers(1, 8),
    st.sampled_from(["any", "node", "nvlink", "rack"]),
)
def test_the_reservation_is_at_the_first_end_after_which_the_job_fits(
    nodes: list[tuple[int, str]],
    held: list[tuple[int, int]],
    workers: int,
    per_worker: int,
    topology: str,
) -> None:
    events: list[Event] = [
        b.node(f"n{n}", gpus, rack=rack, islands=[list(range(gpus // 2)),
               list(range(gpus // 2, gpus))])
        for n, (gpus, rack) in enumerate(nodes)
    ]  # fmt: skip
    free = {f"n{n}": list(range(gpus)) for n, (gpus, _) in enumerate(nodes)}
    for n, (gpus, hours) in enumerate(held):
        node = next((k for k, v in free.items() if len(v) >= gpus), None)
        if node is not None:
            taken, free[node] = free[node][:gpus], free[node][gpus:]
            events += running(f"r{n}", node, taken, ends_in=hours * HOUR)
    events.append(b.submitted("head", per_worker, at=NOW, workers=workers, topology=topology))
    state = fold(*events)
    decided = plan(state, NOW, DEFAULT_POLICY, whole_queue=True)  # looked at even if all is taken
    capacity = Capacity.of(state)
    if capacity.place(workers, per_worker, topology, capacity.models) is not None:
        return  # it starts now
    expected = None
    ends = sorted((NOW + (job.spec.max_runtime_ns or 0) - HOUR, job.job_id)
                  for job in state.jobs.values() if job.job_id != "head")  # fmt: skip
    for end, job_id in ends:
        for node_id, gpus in state.jobs[job_id].placements.items():
            capacity.give(node_id, gpus)
        placed = capacity.place(workers, per_worker, topology, capacity.models)
        if placed is not None:
            expected = (end, placed)
            break
    found = decided.reservation
    assert (None if found is None else (found.starts_at, found.placements)) == expected


def test_past_the_depth_only_a_job_that_ends_by_the_reservation_uses_its_gpus() -> None:
    policy = msgspec.structs.replace(DEFAULT_POLICY, queue_depth=1)  # the rest: filled
    for runtime, starts in ((HOUR, True), (HOUR + 1, False)):
        state = fold(
            b.node("n1", 8),
            *running("r", "n1", [0, 1, 2, 3, 4, 5], ends_in=HOUR),
            b.submitted("big", 8, at=NOW),
            b.submitted("no-end", 2, at=NOW),
            b.submitted("small", 2, at=NOW, max_runtime_ns=runtime),
        )
        decided = plan(state, NOW, policy)
        assert decided.reservation is not None
        assert decided.reservation.starts_at == NOW + HOUR
        assert [a.job_id for a in decided.admissions] == (["small"] if starts else [])


def test_a_remembered_reservation_is_remade_after_an_admission_ahead_of_it() -> None:
    # The running jobs stay the same, but a job admitted ahead of the reserving one this
    # cycle takes GPUs the remembered reservation would have held.
    state = fold(
        b.node("n1", 4),
        b.node("n2", 4),
        *running("r", "n1", [0], ends_in=HOUR),
        *running("s", "n2", [0, 1, 2, 3], ends_in=2 * HOUR),
        b.submitted("wide", 4, at=NOW),
    )
    memo = PlanMemo(state)
    first = plan(state, NOW, DEFAULT_POLICY, memo)
    assert first.reservation is not None
    assert first.reservation.starts_at == NOW + HOUR
    apply(state, state.seq + 1, b.submitted("debug", 1, tier="interactive", at=NOW))
    again = plan(state, NOW, DEFAULT_POLICY, memo)
    assert [a.job_id for a in again.admissions] == ["debug"]
    assert again == plan(state, NOW, DEFAULT_POLICY)
    assert again.reservation is not None
    assert again.reservation.starts_at == NOW + 2 * HOUR


def test_a_remembered_reservation_moves_with_the_clock_once_a_job_overran() -> None:
    # A job past its declared end frees its GPUs "now", whenever now is.
    state = fold(
        b.node("n1", 4),
        *running("late", "n1", [0, 1, 2], ends_in=-HOUR // 2),
        b.submitted("wide", 4, at=NOW),
    )
    memo = PlanMemo(state)
    for now in (NOW, NOW + HOUR):
        decided = plan(state, now, DEFAULT_POLICY, memo)
        assert decided == plan(state, now, DEFAULT_POLICY)
        assert decided.reservation is not None
        assert decided.reservation.starts_at == now


def test_a_reservation_starts_when_a_node_gets_room_not_just_the_cluster() -> None:
    state = fold(
        b.node("n1", 4),
        b.node("n2", 4),
        *running("a", "n1", [0, 1], ends_in=HOUR),  # then 4 are free, but 2 and 2
        *running("keep", "n1", [2, 3], ends_in=9 * HOUR),
        *running("b", "n2", [0, 1], ends_in=2 * HOUR),  # then n2 has all 4
        b.submitted("wide", 4, at=NOW),
    )
    decided = plan(state, NOW, DEFAULT_POLICY)
    assert decided.reservation is not None
    assert decided.reservation.starts_at == NOW + 2 * HOUR
    assert [p.node_id for p in decided.reservation.placements] == ["n2"]


def test_a_gangs_reservation_starts_when_enough_nodes_have_room_for_a_worker() -> None:
    # Two workers of two GPUs: one free GPU on each of two nodes is no room for either.
    state = fold(
        *(b.node(f"n{i}", 4) for i in (1, 2, 3, 4)),
        *running("w", "n1", [0, 1, 2], ends_in=9 * HOUR),
        *running("u", "n2", [0, 1], ends_in=2 * HOUR),  # then a second node has room
        *running("v", "n2", [2, 3], ends_in=9 * HOUR),
        *running("r", "n3", [0, 1], ends_in=HOUR),  # then one node has room: not enough
        *running("t", "n3", [2, 3], ends_in=9 * HOUR),
        *running("x", "n4", [0, 1, 2], ends_in=9 * HOUR),
        b.submitted("gang", 2, workers=2, at=NOW),
    )
    decided = plan(state, NOW, DEFAULT_POLICY)
    assert decided.reservation is not None
    assert decided.reservation.starts_at == NOW + 2 * HOUR
    assert sorted(p.node_id for p in decided.reservation.placements) == ["n2", "n3"]
