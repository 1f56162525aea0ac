"""Each shortcut the planner takes for speed gives what the plain computation gives: the
plan with the shortcut taken, and with it turned off, over random states with quotas. A
shortcut that changed any decision, or any reason told, fails here."""

import heapq
from collections.abc import Iterator
from typing import Any
from unittest import mock

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from allot.core import State, plan, preemption
from allot.core.model import JobRecord
from allot.core.placement import Capacity, NodeSpace
from allot.core.planning import Policy, fill, preempt
from allot.core.planning.cycle import Cycle
from allot.core.planning.fill import Queued
from allot.core.planning.order import ordered
from allot.core.policies import POLICIES
from allot.core.preemption import Grounds, candidates, stoppable_jobs
from allot.core.quota import QuotaBook
from allot.proto.codes import FAIR_SHARE, FUNDED, RECLAIM, TIER
from allot.proto.events import Topology
from tests import builders as b
from tests.builders import fold
from tests.unit.test_quota_properties import (
    HOUR,
    NOW,
    TIERS,
    account_settings,
    run,
    scenario,
    states,
)

# Long queues on clusters with room to spare: what the fill past the depth is for.
roomy_states = st.builds(
    scenario,
    st.lists(st.sampled_from([4, 8]), min_size=1, max_size=3),
    st.one_of(st.none(), st.integers(0, 16)),
    st.lists(account_settings, min_size=3, max_size=3),
    st.lists(run, max_size=4),
    st.lists(
        st.tuples(
            st.sampled_from(["org/a", "org/b", "c"]),
            st.sampled_from([1, 2, 4]),
            st.sampled_from(TIERS),
        ),
        min_size=2,
        max_size=12,
    ),
)
# Shallow queues, so that the fill past the depth and preemption are exercised too.
policies = st.builds(
    lambda name, depth: msgspec.structs.replace(POLICIES[name], queue_depth=depth),
    st.sampled_from(["allot", "kueue", "priority", "slurm"]),
    st.integers(1, 4),
)


def _alike_without(state: State, policy: Policy, shortcut: Any) -> None:
    """The plan is the same with the shortcut as with it replaced by the plain way."""
    taken = plan(state, NOW, policy)
    with shortcut:
        plain = plan(state, NOW, policy)
    assert taken == plain


@settings(max_examples=300, deadline=None)
@given(st.one_of(states, roomy_states), policies)
def test_the_fill_puts_back_jobs_that_borrow_anywhere_as_if_it_had_placed_them(
    state: State, policy: Policy
) -> None:
    never = mock.patch.object(Cycle, "borrows_anywhere", return_value=False)
    _alike_without(state, policy, never)


@st.composite
def spaces_and_freed(draw: st.DrawFn) -> tuple[list[NodeSpace], list[tuple[str, list[int]]]]:
    """Nodes of two models in two racks, islands of various sizes, some GPUs free; and GPUs
    to free, by node: mostly held ones, some free already, some of no such GPU or node."""
    spaces, freed = [], []
    for n in range(draw(st.integers(1, 5))):
        sizes = draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
        every, start = [], 0
        for size in sizes:
            every.append(list(range(start, start + size)))
            start += size
        free = [[g for g in island if draw(st.booleans())] for island in every]
        home = {g: i for i, island in enumerate(every) for g in island}
        model, rack = draw(st.sampled_from(["A", "B"])), draw(st.sampled_from(["r1", "r2"]))
        spaces.append(NodeSpace(f"n{n}", n, model, rack, free, home))
        for _ in range(draw(st.integers(0, 2))):
            gpus = draw(st.lists(st.integers(0, start), max_size=4))  # ``start``: none such
            freed.append((draw(st.sampled_from([f"n{n}", "gone"])), gpus))
    return spaces, freed


@settings(max_examples=1500, deadline=None)
@given(
    spaces_and_freed(),
    st.integers(1, 4),
    st.integers(1, 4),
    st.sampled_from(["any", "rack", "node", "nvlink"]),
    st.sampled_from([["A"], ["B"], ["A", "B"], []]),
)
def test_fits_with_says_what_placing_with_the_gpus_lent_finds(
    nodes: tuple[list[NodeSpace], list[tuple[str, list[int]]]],
    workers: int,
    per_worker: int,
    topology: Topology,
    models: list[str],
) -> None:
    spaces, freed = nodes
    capacity = Capacity(spaces)
    fits = capacity.fits_with(workers, per_worker, topology, models, freed)
    trial = capacity.copy()
    with trial.lent(freed):
        placed = trial.place(workers, per_worker, topology, models)
    assert fits == (placed is not None)


ACCOUNT_SETS = st.frozensets(st.sampled_from(["org", "org/a", "org/b", "c"]))


@settings(max_examples=300, deadline=None)
@given(
    states,
    st.sampled_from(TIERS),
    st.builds(
        Grounds,
        funded=st.booleans(),
        reclaims_from=ACCOUNT_SETS,
        under_share=st.booleans(),
        over_share=ACCOUNT_SETS,
        allowed=st.frozensets(st.sampled_from([TIER, FUNDED, RECLAIM, FAIR_SHARE])),
    ),
    st.sampled_from([None, HOUR, 4 * HOUR]),
)
def test_candidates_past_the_slice_alone_are_those_of_the_whole_list(
    state: State, tier: str, grounds: Grounds, time_slice: int | None
) -> None:
    running = stoppable_jobs(state, NOW, 60_000, time_slice)
    waiting = msgspec.structs.replace(b.spec(), tier=tier)
    found = candidates(running, waiting, grounds, set())
    with mock.patch.object(preemption, "only_fair_share", return_value=False):
        assert found == candidates(running, waiting, grounds, set())


@settings(max_examples=200, deadline=None)
@given(states, policies)
def test_candidates_past_the_slice_alone_plan_alike(state: State, policy: Policy) -> None:
    every = mock.patch.object(preemption, "only_fair_share", return_value=False)
    _alike_without(state, policy, every)


def _merged_again(cycle: Cycle, unreached: Queued, left: int) -> Iterator[JobRecord]:
    """The plain way to the jobs a fill looks at: every queue of jobs of no more than
    ``left`` GPUs merged again from the top, less the jobs the cycle looked at."""
    looked = {w.reason.job_id for w in cycle.waiting} | {a.job.job_id for a in cycle.admitted}
    queue = ordered(cycle.state, cycle.ranked, cycle.now, cycle.policy, left)
    return (job for job in queue if job.job_id not in looked)


@settings(max_examples=300, deadline=None)
@given(st.one_of(states, roomy_states), policies)
def test_the_fill_goes_on_where_the_cycle_stopped_as_if_it_merged_the_queues_again(
    state: State, policy: Policy
) -> None:
    again = mock.patch.object(fill, "not_looked_at", _merged_again)
    _alike_without(state, policy, again)
    # Reading on from where the cycle stopped, whatever the sizes of the jobs waiting.
    with mock.patch.object(fill, "mostly_fitting", return_value=True):
        _alike_without(state, policy, again)


@given(st.sets(st.integers(1, 60)), st.sets(st.integers(1, 60)))
def test_looked_at_and_unreached_follow_one_another_as_a_merge_orders_them(
    looked: set[int], unreached: set[int]
) -> None:
    job = fold(b.submitted("j")).jobs["j"]
    ours = [(p, 0, job) for p in sorted(looked)]
    theirs = [(p, None, job) for p in sorted(unreached - looked)]
    merged = preempt._merged(ours, iter(theirs))
    assert list(merged) == list(heapq.merge(ours, theirs, key=lambda entry: entry[0]))


@settings(max_examples=200, deadline=None)
@given(st.one_of(states, roomy_states), policies)
def test_the_scan_follows_on_without_merging_and_plans_alike(state: State, policy: Policy) -> None:
    def merged(looked: list[Any], unreached: Iterator[Any]) -> Iterator[Any]:
        return heapq.merge(looked, unreached, key=lambda entry: entry[0])

    _alike_without(state, policy, mock.patch.object(preempt, "_merged", merged))


@settings(max_examples=300, deadline=None)
@given(states, st.integers(0, 12))
def test_may_reclaim_says_whether_anyone_borrows_against_the_account(
    state: State, need: int
) -> None:
    book = QuotaBook(state)
    for account in ["org", "org/a", "org/b", "c", "elsewhere"]:
        assert book.may_reclaim(account, need) == bool(book.borrowers_against(account, need))
