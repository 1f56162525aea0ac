"""How far a planning cycle looks (docs/adr/0010): the queue is merged, not sorted; a cycle
stops at the policy's depth, or once no GPU is left, and decides the same either way."""

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from allot.core import DEFAULT_POLICY, Policy, apply, plan
from allot.core.fairshare import standings
from allot.core.model import JobRecord
from allot.core.planning import Plan, queue
from allot.core.planning.order import ordered
from allot.proto.events import TIERS
from tests import builders as b
from tests.builders import fold

HOUR = 3600 * 10**9
NOW = 10 * HOUR


def test_jobs_beyond_the_depth_are_not_looked_at_this_cycle() -> None:
    state = fold(b.node("n1", 8), *(b.submitted(f"j{i}", at=NOW) for i in range(4)))
    shallow = msgspec.structs.replace(DEFAULT_POLICY, queue_depth=2, fill_depth=0)
    decided = plan(state, NOW, shallow)
    assert [a.job_id for a in decided.admissions] == ["j0", "j1"]
    assert decided.waiting == []
    assert [(r.job_id, r.code) for r in decided.pending] == [("j2", "QUEUED"), ("j3", "QUEUED")]
    # The whole queue, as ``allot queue`` shows it, would start all four.
    full = plan(state, NOW, DEFAULT_POLICY, whole_queue=True)
    assert [a.job_id for a in full.admissions] == ["j0", "j1", "j2", "j3"]


def test_past_the_depth_only_jobs_that_fit_what_is_left_are_looked_at_to_fill_it() -> None:
    # Two GPUs stay free: the 8-GPU head job waits for them and more. Past the depth of 1,
    # the 4-GPU job is passed over (it could not fit), the first 2-GPU job starts; the
    # second 2-GPU job finds nothing left. None of them is told anything new but QUEUED.
    state = fold(
        b.node("n1", 8),
        b.submitted("running", 6, at=NOW - HOUR),
        b.plan(("running", "n1", [0, 1, 2, 3, 4, 5])),
        b.started("running", "n1", [0, 1, 2, 3, 4, 5]),
        b.submitted("head", 8, at=NOW),
        b.submitted("four", 4, at=NOW),
        b.submitted("two", 2, at=NOW),
        b.submitted("another", 2, at=NOW),
    )
    policy = msgspec.structs.replace(DEFAULT_POLICY, queue_depth=1, fill_depth=3)
    decided = plan(state, NOW, policy)
    assert [a.job_id for a in decided.admissions] == ["two"]
    assert [(r.job_id, r.code) for r in decided.pending] == [
        ("head", "NO_FIT"),
        ("four", "QUEUED"),
        ("another", "QUEUED"),
    ]
    without = plan(state, NOW, msgspec.structs.replace(policy, fill_depth=0))
    assert without.admissions == []


def test_once_no_gpu_is_left_the_rest_are_told_once_they_are_queued() -> None:
    state = fold(
        b.node("n1", 2),
        b.submitted("first", 2, at=NOW),
        b.submitted("second", 1, at=NOW),
        b.submitted("third", 1, at=NOW),
    )
    decided = plan(state, NOW, DEFAULT_POLICY)
    assert [a.job_id for a in decided.admissions] == ["first"]
    queued = [("second", "QUEUED"), ("third", "QUEUED")]
    assert [(r.job_id, r.code) for r in decided.pending] == queued
    shown = plan(state, NOW, DEFAULT_POLICY, whole_queue=True)
    stated = [(r.job_id, r.code) for r in shown.pending]
    assert stated == [("second", "BEHIND"), ("third", "BEHIND")]
    # Once stated, a full cluster's cycle has nothing to add about them.
    apply(state, state.seq + 1, msgspec.structs.replace(b.plan(), **_recorded(decided)))
    assert plan(state, NOW + 1, DEFAULT_POLICY).empty


def _recorded(decided: Plan) -> dict[str, object]:
    return {"admissions": decided.admissions, "pending": decided.pending}


def test_without_nodes_every_job_is_told_so() -> None:
    state = fold(b.submitted("a", at=NOW), b.submitted("b", at=NOW))
    assert [r.code for r in plan(state, NOW, DEFAULT_POLICY).pending] == ["NO_NODES", "NO_NODES"]


def test_a_job_the_cycle_did_not_reach_may_still_preempt() -> None:
    state = fold(
        b.node("n1", 2),
        b.submitted("batch", 2, at=NOW - HOUR),
        b.plan(("batch", "n1", [0, 1])),
        b.started("batch", "n1", [0, 1]),
        b.submitted("notebook", 1, at=NOW, tier="interactive"),
    )
    decided = plan(state, NOW, DEFAULT_POLICY)
    assert [(p.job_id, p.code) for p in decided.preemptions] == [("batch", "TIER")]
    assert [(r.job_id, r.code) for r in decided.pending] == [("notebook", "PREEMPTING")]
    assert [h.job_id for h in decided.holds] == ["notebook"]


jobs = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "c"]),
        st.sampled_from(["interactive", "batch", "best-effort"]),
        st.integers(0, 5 * HOUR),  # how much later than the previous one it was submitted
    ),
    max_size=25,
)


@settings(max_examples=80, deadline=None)
@given(jobs, st.sampled_from(["fair-share", "fifo", "tier", "multifactor"]))
def test_merging_the_queues_gives_the_order_a_full_sort_would(
    submitted: list[tuple[str, str, int]], order: str
) -> None:
    events, at = [b.node("n1", 1), b.lost("n1")], 0
    for n, (account, tier, later) in enumerate(submitted):
        at += later
        events.append(b.submitted(f"j{n}", 1 + n % 3, at=at, account=account, tier=tier))
    state = fold(*events)
    policy = Policy(order=order, aging_step_ns=HOUR, aging_max_ranks=2, max_age_ns=10 * HOUR)
    now = at + HOUR
    ranked = standings(state, now, policy.fair_share)
    accounts = len(ranked)

    def documented(job: JobRecord) -> tuple[int, ...]:  # the planner's docstring, as a sort
        tier, seq, waited = TIERS.index(job.spec.tier), job.submitted_seq, now - job.submitted_at
        rank = ranked[job.spec.account].rank
        if order == "fair-share":  # no budgets here, so none is exhausted
            return (tier, rank - min(waited // HOUR, 2), seq)
        if order == "multifactor":
            age = min(waited, policy.max_age_ns) * 10**6 // policy.max_age_ns
            return (-(age + (accounts - rank + 1) * 10**6 // accounts), seq)
        return (tier, seq) if order == "tier" else (seq,)

    expected = sorted((state.jobs[j] for j in state.pending), key=documented)
    assert [j.job_id for j in queue(state, now, policy)] == [j.job_id for j in expected]
    # Filling merges the queues split by size: the same order, of the jobs small enough.
    small = [j.job_id for j in expected if j.spec.total_gpus <= 2]
    assert [j.job_id for j in ordered(state, ranked, now, policy, fits=2)] == small


def test_ranks_are_stated_only_by_policies_that_use_fair_share() -> None:
    state = fold(b.node("n1", 1), b.submitted("a", 2, at=NOW))
    assert [r.account for r in plan(state, NOW, DEFAULT_POLICY).ranks] == ["lab/team"]
    fifo = Policy(order="fifo", strict=True, preemption=False)
    assert plan(state, NOW, fifo).ranks == []
