"""Admission and preemption where quotas share GPUs out, rule by rule (docs/adr/0032):
nominal quota before borrowing, reclaiming lent quota, no preemption that cannot help,
priority inside an account, the order of victims among equal cost, and each account's
preemption rules."""

from typing import Any

import msgspec

from allot.core import DEFAULT_POLICY, Policy, State, apply, plan
from allot.core.planning import Plan
from allot.core.policies import POLICIES
from allot.proto.events import (
    AccountDefined,
    AccountPreemption,
    AccountSettings,
    Event,
    JobCheckpointed,
)
from tests import builders as b
from tests.builders import fold

S = 10**9
HOUR = 3600 * S
NOW = 10 * HOUR
KUEUE = POLICIES["kueue"]  # first in, first out: the queue's order says nothing of quota


def account(path: str, **settings: Any) -> AccountDefined:
    return AccountDefined(meta=b.meta(), path=path, settings=AccountSettings(**settings))


def rules(path: str, quota: int, **preemption: Any) -> AccountDefined:
    return account(path, quota={"gpu": quota}, preemption=AccountPreemption(**preemption))


def running(
    job_id: str,
    node: str,
    gpus: list[int],
    *,
    ran: int = HOUR,
    checkpointed: int = 600 * S,
    **spec: Any,
) -> list[Event]:
    """A job of ``spec`` running on ``node`` since ``NOW - ran``, its last checkpoint
    ``checkpointed`` ago (by default ten minutes: jobs of as many GPUs lose as much work)."""
    start = msgspec.structs.replace(b.started(job_id, node, gpus), meta=b.meta(NOW - ran))
    checkpoint = JobCheckpointed(
        meta=b.meta(NOW - checkpointed), job_id=job_id, node_id=node, path="/c", step=1
    )
    return [
        b.submitted(job_id, len(gpus), resumable=True, **spec),
        b.plan((job_id, node, gpus)),
        start,
        checkpoint,
    ]


def stopped(decided: Plan) -> dict[str, tuple[str, object]]:
    return {p.job_id: (p.code, p.params.get("for")) for p in decided.preemptions}


def admitted(decided: Plan) -> list[str]:
    return [a.job_id for a in decided.admissions]


def admitted_on(decided: Plan, job_id: str) -> set[tuple[str, int]]:
    """The (node, GPU) pairs the plan admits the job on."""
    return {
        (p.node_id, g)
        for a in decided.admissions if a.job_id == job_id
        for p in a.placements for g in p.gpus
    }  # fmt: skip


# 1. Nominal quota before borrowing


def test_work_within_its_nominal_quota_is_admitted_before_work_that_would_borrow() -> None:
    state = fold(
        b.node("n1", 8),
        b.node("n2", 4),
        account("a", quota={"gpu": 4}),
        account("b", quota={"gpu": 8}),
        *running("a-running", "n2", [0, 1, 2, 3], account="a"),
        b.submitted("a-borrows", 8, account="a", at=NOW),  # first in the queue
        b.submitted("b-own", 8, account="b", at=NOW + 1),
    )
    decided = plan(state, NOW, KUEUE)
    assert admitted(decided) == ["b-own"]
    assert [w.reason.job_id for w in decided.waiting] == ["a-borrows"]


def test_with_equal_usage_the_account_within_its_quota_wins_whatever_the_names() -> None:
    for borrower, lender in (("a", "z"), ("z", "a")):
        state = fold(
            b.node("n1", 8),
            account(borrower, quota={"gpu": 0}),
            account(lender, quota={"gpu": 8}),
            b.submitted("borrows", 8, account=borrower, at=NOW),
            b.submitted("own", 8, account=lender, at=NOW),
        )
        decided = plan(state, NOW, DEFAULT_POLICY)
        assert admitted(decided) == ["own"], (borrower, lender)
        assert decided.preemptions == []


def test_own_quota_first_counts_quotas_of_a_gpu_model() -> None:
    state = fold(
        b.node("n1", 8, model="A100"),
        b.node("n2", 4, model="A100"),
        account("a", quota={"gpu:A100": 4}),
        account("b", quota={"gpu:A100": 8}),
        *running("a-running", "n2", [0, 1, 2, 3], account="a"),
        b.submitted("a-borrows", 8, account="a", at=NOW),
        b.submitted("b-own", 8, account="b", at=NOW + 1),
    )
    assert admitted(plan(state, NOW, KUEUE)) == ["b-own"]


def test_work_put_back_for_borrowing_keeps_its_place_ahead_of_the_reservation() -> None:
    state = fold(
        b.node("n1", 8),
        account("a", quota={"gpu": 2}),
        account("b", quota={"gpu": 6}),
        account("c", quota={"gpu": 0}),
        *running("a-running", "n1", [0, 1], account="a", max_runtime_ns=2 * HOUR),
        *running("c-running", "n1", [2, 3, 4, 5], account="c", max_runtime_ns=3 * HOUR),
        b.submitted("a-borrows", 1, account="a", at=NOW),  # would borrow; first in the queue
        b.submitted("b-own", 4, account="b", at=NOW + 1),  # within its quota, short of room
    )
    decided = plan(state, NOW, msgspec.structs.replace(KUEUE, backfill=True))
    # b-own is reserved for, and the two free GPUs set aside for it; a-borrows, ahead of
    # it in the queue, still starts on one of them, as it would have, looked at first.
    assert admitted(decided) == ["a-borrows"]
    assert decided.reservation is not None
    assert decided.reservation.job_id == "b-own"
    # a-borrows declares no end, so b-own cannot count on that GPU: it is reserved for
    # anew, where it fits once c-running has ended (in 2 h), not once a-running has (1 h).
    taken = admitted_on(decided, "a-borrows")
    assert not taken & {(p.node_id, g) for p in decided.reservation.placements for g in p.gpus}
    assert decided.reservation.starts_at == NOW + 2 * HOUR


# 2. Reclaiming lent quota when the cohort has a quota of its own


def reclaim_scenario(**lender_rules: Any) -> State:
    """``org`` may hold 8 GPUs of 16; ``org/b`` holds all 8, 4 of them lent by ``org/a``."""
    return fold(
        b.node("n1", 8),
        b.node("n2", 8),
        account("org", quota={"gpu": 8}),
        rules("org/a", 4, **lender_rules),
        account("org/b", quota={"gpu": 4}),
        *running("b1", "n1", [0, 1, 2, 3], account="org/b"),
        *running("b2", "n1", [4, 5, 6, 7], account="org/b", ran=2 * HOUR),
        b.submitted("a-own", 4, account="org/a", at=NOW),
    )


def test_quota_lent_within_a_cohort_that_has_a_quota_is_reclaimed() -> None:
    state = reclaim_scenario()
    decided = plan(state, NOW, DEFAULT_POLICY)
    # Eight GPUs are free, but org's quota is spent by org/b's borrowing: one of its jobs
    # is stopped, and only one.
    assert len(decided.preemptions) == 1
    assert next(iter(stopped(decided).values())) == ("RECLAIM", "a-own")


def test_a_reclaimed_job_gives_the_lender_its_quota_back() -> None:
    state = reclaim_scenario()
    decided = plan(state, NOW, DEFAULT_POLICY)
    victim = decided.preemptions[0].job_id
    apply(
        state,
        state.seq + 1,
        msgspec.structs.replace(b.plan(), preemptions=decided.preemptions, holds=decided.holds),
    )
    exit_ = msgspec.structs.replace(b.exited(victim, "n1", 0), stopped_in_ns=S)
    apply(state, state.seq + 1, exit_)
    after = plan(state, NOW + S, DEFAULT_POLICY)
    assert admitted(after) == ["a-own"]
    assert after.preemptions == []


# 3. Never a preemption that cannot help


def test_no_job_is_stopped_for_a_job_its_quota_would_refuse_even_then() -> None:
    state = fold(
        b.node("n1", 8),
        account("keeper", quota={"gpu": 4}, lending_limit={"gpu": 0}),
        account("big", quota={"gpu": 4}),
        # best-effort and unable to resume: stopped, it loses everything
        *running("keeper-be", "n1", [0, 1, 2, 3], account="keeper", tier="best-effort"),
        b.submitted("wants-8", 8, account="big", at=NOW),
    )
    decided = plan(state, NOW, DEFAULT_POLICY)
    # keeper keeps 4 GPUs for itself whether it uses them or not: big never gets 8.
    assert decided.preemptions == []
    assert decided.holds == []


# 4. Priority inside an account at its quota


def at_its_quota(**own_rules: Any) -> State:
    return fold(
        b.node("n1", 8),
        b.node("n2", 8),
        account("a", quota={"gpu": 4}, borrowing_limit={"gpu": 0}, **own_rules),
        account("b", quota={"gpu": 12}),
        *running("a-batch", "n1", [0, 1, 2, 3], account="a", tier="batch"),
        b.submitted("a-notebook", 4, account="a", tier="interactive", at=NOW),
    )


def test_an_account_at_its_quota_stops_its_own_lower_tier_work_for_a_higher_tier() -> None:
    decided = plan(at_its_quota(), NOW, DEFAULT_POLICY)
    assert stopped(decided) == {"a-batch": ("TIER", "a-notebook")}


def test_an_account_that_says_never_keeps_its_own_running_work() -> None:
    never = AccountPreemption(within_account="never")
    decided = plan(at_its_quota(preemption=never), NOW, DEFAULT_POLICY)
    assert decided.preemptions == []


# 5. Victims among equal cost: lower tier, then borrowed, then most recently started


def test_among_equal_cost_the_least_urgent_tier_is_stopped() -> None:
    state = fold(
        b.node("n1", 8),
        *running("a-batch", "n1", [0, 1, 2, 3], tier="batch"),
        *running("z-best-effort", "n1", [4, 5, 6, 7], tier="best-effort"),
        b.submitted("notebook", 4, tier="interactive", at=NOW),
    )
    assert stopped(plan(state, NOW, DEFAULT_POLICY)) == {"z-best-effort": ("TIER", "notebook")}


def test_among_equal_cost_and_tier_the_most_recently_started_is_stopped() -> None:
    state = fold(
        b.node("n1", 8),
        *running("a-early", "n1", [0, 1, 2, 3], ran=3 * HOUR),
        *running("z-late", "n1", [4, 5, 6, 7], ran=HOUR),
        b.submitted("notebook", 4, tier="interactive", at=NOW),
    )
    assert stopped(plan(state, NOW, DEFAULT_POLICY)) == {"z-late": ("TIER", "notebook")}


def test_among_equal_cost_and_tier_borrowed_capacity_is_stopped_first() -> None:
    state = fold(
        b.node("n1", 8),
        b.node("n2", 4),
        account("p", quota={"gpu": 4}),
        account("q", quota={"gpu": 8}),
        *running("p-on-n2", "n2", [0, 1, 2, 3], account="p"),
        *running("a-own", "n1", [0, 1, 2, 3], account="q"),  # q's, within its quota
        *running("z-borrowed", "n1", [4, 5, 6, 7], account="p"),  # p is over its 4
        b.submitted("q-notebook", 4, account="q", tier="interactive", at=NOW),
    )
    found = stopped(plan(state, NOW, DEFAULT_POLICY))
    assert len(found) == 1
    assert set(found) <= {"z-borrowed", "p-on-n2"}


# 7. Each account's preemption rules, and the quota of others


def test_a_job_of_an_account_within_its_quota_is_not_stopped_for_another_account() -> None:
    state = fold(
        b.node("n1", 8),
        account("a", quota={"gpu": 4}),
        account("b", quota={"gpu": 4}),
        *running("a1", "n1", [0, 1, 2, 3], account="a", tier="interactive"),
        *running("b-batch", "n1", [4, 5, 6, 7], account="b", tier="batch"),
        # a is at its quota: this job would borrow b's, which b is using
        b.submitted("a-notebook", 4, account="a", tier="interactive", at=NOW),
    )
    assert plan(state, NOW, DEFAULT_POLICY).preemptions == []


def test_reclaiming_from_lower_tiers_only_spares_a_borrower_of_the_same_tier() -> None:
    any_tier = plan(reclaim_scenario(), NOW, DEFAULT_POLICY)
    lower = plan(reclaim_scenario(reclaim_within_cohort="lower-tier"), NOW, DEFAULT_POLICY)
    never = plan(reclaim_scenario(reclaim_within_cohort="never"), NOW, DEFAULT_POLICY)
    assert len(any_tier.preemptions) == 1
    assert lower.preemptions == []
    assert never.preemptions == []


def test_lent_quota_is_reclaimed_from_a_higher_tier_borrower() -> None:
    state = fold(
        b.node("n1", 8),
        account("a", quota={"gpu": 4}),
        account("b", quota={"gpu": 4}),
        *running("b-own", "n1", [0, 1, 2, 3], account="b", tier="interactive"),
        *running("b-borrowed", "n1", [4, 5, 6, 7], account="b", tier="interactive"),
        b.submitted("a-batch", 4, account="a", tier="batch", at=NOW),
    )
    found = stopped(plan(state, NOW, DEFAULT_POLICY))
    assert len(found) == 1
    assert next(iter(found.values())) == ("RECLAIM", "a-batch")


def borrowing_scenario(**borrower_rules: Any) -> State:
    """``a`` is at its quota and would borrow for its notebook; ``c`` borrows with a
    best-effort and a batch job; ``b`` lends."""
    return fold(
        b.node("n1", 8),
        b.node("n2", 8),
        rules("a", 4, **borrower_rules),
        account("b", quota={"gpu": 8}),
        account("c", quota={"gpu": 4}),
        *running("a1", "n1", [0, 1, 2, 3], account="a", tier="interactive"),
        *running("c-batch", "n1", [4, 5, 6, 7], account="c", tier="batch", ran=HOUR),
        # the best-effort jobs would lose more work than the batch job
        *running("c-be", "n2", [0, 1, 2, 3], account="c", tier="best-effort", checkpointed=HOUR),
        *running("c-be2", "n2", [4, 5, 6, 7], account="c", tier="best-effort", checkpointed=HOUR),
        b.submitted("a-notebook", 4, account="a", tier="interactive", at=NOW),
    )


def test_borrowing_work_stops_other_borrowers_only_as_its_account_allows() -> None:
    # c holds 12 of its 4: 8 borrowed
    cheapest = plan(borrowing_scenario(), NOW, DEFAULT_POLICY)
    assert stopped(cheapest) == {"c-batch": ("TIER", "a-notebook")}
    never = plan(borrowing_scenario(borrow_within_cohort="never"), NOW, DEFAULT_POLICY)
    assert never.preemptions == []
    capped = plan(borrowing_scenario(borrow_max_tier="best-effort"), NOW, DEFAULT_POLICY)
    assert len(stopped(capped)) == 1
    assert set(stopped(capped)) <= {"c-be", "c-be2"}


def test_a_borrower_is_stopped_only_while_it_still_borrows() -> None:
    state = fold(
        b.node("n1", 8),
        account("a", quota={"gpu": 4}),
        account("b", quota={"gpu": 4}),
        *running("b1", "n1", [0, 1], account="b"),
        *running("b2", "n1", [2, 3], account="b"),
        *running("b3", "n1", [4, 5, 6], account="b"),  # b borrows 3
        b.submitted("a-own", 4, account="a", at=NOW),
    )
    decided = plan(state, NOW, DEFAULT_POLICY)
    # Stopping b3 and one 2-GPU job would free 5; but b3 alone takes b back to its quota, and
    # one free GPU with b3's three is the 4 a is owed.
    assert stopped(decided) == {"b3": ("RECLAIM", "a-own")}


def test_account_preemption_rules_are_read_from_a_tree_and_bad_ones_are_named() -> None:
    from allot.core.accounts import read_tree

    tree, errors = read_tree(
        {
            "lab": {"preemption": {"reclaim_within_cohort": "lower-tier"}},
            "lab/x": {"preemption": {"within_account": "sometimes"}},
        }
    )
    assert tree["lab"].preemption == AccountPreemption(reclaim_within_cohort="lower-tier")
    assert [e.field for e in errors] == ["accounts.lab/x.preemption.within_account"]
    assert "sometimes" in errors[0].value
    assert "never" in errors[0].message


def test_rules_are_inherited_from_the_nearest_account_that_states_them() -> None:
    state = fold(
        b.node("n1", 8),
        b.node("n2", 8),
        account("lab", preemption=AccountPreemption(within_account="never")),
        account("lab/a", quota={"gpu": 4}, borrowing_limit={"gpu": 0}),
        account("lab/b", quota={"gpu": 12}),
        *running("a-batch", "n1", [0, 1, 2, 3], account="lab/a", tier="batch"),
        b.submitted("a-notebook", 4, account="lab/a", tier="interactive", at=NOW),
    )
    assert plan(state, NOW, DEFAULT_POLICY).preemptions == []


def test_without_quotas_the_policy_grounds_alone_decide() -> None:
    state = fold(
        b.node("n1", 8),
        *running("batch", "n1", [0, 1, 2, 3, 4, 5, 6, 7], account="b", tier="batch"),
        b.submitted("notebook", 8, account="a", tier="interactive", at=NOW),
    )
    assert stopped(plan(state, NOW, Policy())) == {"batch": ("TIER", "notebook")}


def test_jobs_already_being_stopped_do_not_count_as_their_accounts_borrowing() -> None:
    state = fold(
        b.node("n0", 8),
        account("a", quota={"gpu": 4}),
        account("b", quota={"gpu": 4}),
        *running("b1", "n0", [0, 1], account="b", tier="best-effort", ran=3 * HOUR),
        *running("b2", "n0", [2, 3], account="b", tier="best-effort", ran=4 * HOUR),
        *running("b3", "n0", [4, 5], account="b", tier="best-effort", ran=5 * HOUR),
        *running("a-batch", "n0", [6, 7], account="a", tier="batch"),
        b.submitted("a-first", 2, account="a", tier="interactive", at=NOW),
        b.submitted("a-second", 2, account="a", tier="interactive", at=NOW + 1),
    )
    decided = plan(state, NOW, DEFAULT_POLICY)
    # b borrows 2: one of its jobs may go, and then b is at its quota; a-second stops a's own.
    found = stopped(decided)
    assert len(found) == 2
    assert found["a-batch"] == ("TIER", "a-second")
    assert len(set(found) & {"b1", "b2", "b3"}) == 1


def test_quotas_of_a_gpu_model_guard_an_accounts_own_jobs_as_gpu_quotas_do() -> None:
    for resource in ("gpu", "gpu:A100"):
        state = fold(
            b.node("n0", 8, model="A100"),
            account("a", quota={resource: 4}),
            account("b", quota={resource: 4}),
            *running("b1", "n0", [0, 1], account="b", tier="best-effort"),
            *running("b2", "n0", [2, 3], account="b", tier="best-effort"),
            *running("a-batch", "n0", [4, 5, 6, 7], account="a", tier="batch"),
            b.submitted("a-notebook", 2, account="a", tier="interactive", at=NOW),
        )
        found = stopped(plan(state, NOW, DEFAULT_POLICY))
        assert found == {"a-batch": ("TIER", "a-notebook")}, resource


def test_a_preemption_for_quota_of_one_model_does_not_depend_on_node_names() -> None:
    for first, second in (("n-a", "n-b"), ("n-b", "n-a")):
        state = fold(
            b.node(first, 4, model="A100"),
            b.node(second, 4, model="H100"),
            account("a", quota={"gpu:H100": 4}, borrowing_limit={"gpu:A100": 0}),
            account("c", quota={"gpu:H100": 0}),
            *running("c-a100", first, [0, 1, 2, 3], account="c", tier="best-effort"),
            *running("c-h100", second, [0, 1, 2, 3], account="c", tier="best-effort"),
            b.submitted("a-notebook", 4, account="a", tier="interactive", at=NOW),
        )
        found = stopped(plan(state, NOW, DEFAULT_POLICY))
        assert found == {"c-h100": ("TIER", "a-notebook")}, first


def test_a_hold_stands_while_the_jobs_its_quota_waits_for_are_still_stopping() -> None:
    state = fold(
        b.node("n0", 3),
        account("a", quota={"gpu": 0}, borrowing_limit={"gpu": 2}),
        account("b", quota={"gpu": 0}),
        *running("a-be", "n0", [0, 1], account="a", tier="best-effort"),
        *running("b-be", "n0", [2], account="b", tier="best-effort"),
        b.submitted("w1", 1, account="a", tier="interactive", at=NOW),
        b.submitted("w2", 1, account="a", tier="interactive", at=NOW + 1),
    )
    decided = plan(state, NOW, DEFAULT_POLICY)
    assert stopped(decided) == {"a-be": ("TIER", "w1"), "b-be": ("TIER", "w2")}
    apply(
        state,
        state.seq + 1,
        msgspec.structs.replace(b.plan(), preemptions=decided.preemptions, holds=decided.holds),
    )
    # b-be is gone, a-be still checkpoints: w2 needs a's quota back from it as well.
    apply(state, state.seq + 1, msgspec.structs.replace(b.exited("b-be", "n0", 0), stopped_in_ns=S))
    apply(state, state.seq + 1, b.submitted("b-new", 1, account="b", at=NOW + 5))
    after = plan(state, NOW + 6, DEFAULT_POLICY)
    assert after.admissions == []
    assert {w.reason.job_id: w.reason.code for w in after.waiting}["w2"] == "PREEMPTING"
