"""Each shortcut the planner takes for speed gives what the plain computation gives: the
plan with the shortcut taken, and with it turned off, over random states with quotas. A
shortcut that changed any decision, or any reason told, fails here."""

from typing import Any
from unittest import mock

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from allot.core import State, plan
from allot.core.planning import Policy
from allot.core.planning.cycle import Cycle
from allot.core.policies import POLICIES
from tests.unit.test_quota_properties import (
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
