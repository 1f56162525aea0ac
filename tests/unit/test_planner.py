import msgspec
from hypothesis import given
from hypothesis import strategies as st

from allot.core import POLICY_FIRST_FIT, Policy, apply, plan, policy_hash
from allot.proto.events import Admission, PendingReason
from tests import builders as b
from tests.builders import fold


def test_first_fit_takes_the_first_node_with_room_and_its_lowest_gpus() -> None:
    state = fold(
        b.node("n2", 8),
        b.node("n1", 4),
        b.submitted("a", 3),
        b.submitted("b", 2),
        b.submitted("c", 8),
    )
    decided = plan(state, now=5, policy=POLICY_FIRST_FIT)
    assert decided.admissions == [
        Admission(job_id="a", node_id="n1", gpus=[0, 1, 2]),
        Admission(job_id="b", node_id="n2", gpus=[0, 1]),
    ]
    assert decided.pending == [PendingReason(job_id="c", code="NO_FIT", params={"need": 8})]


def test_a_job_that_does_not_fit_does_not_block_smaller_ones_behind_it() -> None:
    state = fold(b.node("n1", 4), b.submitted("big", 8), b.submitted("small", 1))
    decided = plan(state, now=5, policy=POLICY_FIRST_FIT)
    assert [a.job_id for a in decided.admissions] == ["small"]


def test_without_nodes_every_job_waits_for_nodes() -> None:
    decided = plan(fold(b.submitted("a")), now=5, policy=POLICY_FIRST_FIT)
    assert decided.pending == [PendingReason(job_id="a", code="NO_NODES")]


def test_lost_nodes_get_nothing() -> None:
    state = fold(b.node("n1"), b.lost("n1"), b.submitted("a"))
    assert plan(state, now=5, policy=POLICY_FIRST_FIT).admissions == []


def test_a_plan_states_only_reasons_that_changed() -> None:
    state = fold(b.node("n1", 1), b.submitted("a", 2), b.submitted("b", 1))
    decided = plan(state, now=5, policy=POLICY_FIRST_FIT)
    assert [a.job_id for a in decided.admissions] == ["b"]
    assert decided.pending == [PendingReason(job_id="a", code="NO_FIT", params={"need": 2})]
    apply(state, 4, msgspec.structs.replace(b.plan(("b", "n1", [0])), pending=decided.pending))

    assert plan(state, now=6, policy=POLICY_FIRST_FIT).empty
    apply(state, 5, b.lost("n1"))
    again = plan(state, now=7, policy=POLICY_FIRST_FIT)
    assert again.pending == [PendingReason(job_id="a", code="NO_NODES")]


def test_the_policy_hash_follows_the_content() -> None:
    assert policy_hash(Policy()) == policy_hash(Policy(name="first-fit"))
    assert policy_hash(Policy()) != policy_hash(Policy(name="other"))


@given(
    nodes=st.lists(st.integers(1, 8), min_size=1, max_size=4),
    jobs=st.lists(st.integers(1, 8), max_size=12),
    order=st.randoms(use_true_random=False),
)
def test_no_gpu_is_assigned_twice_and_the_plan_ignores_input_order(
    nodes: list[int], jobs: list[int], order
) -> None:  # type: ignore[no-untyped-def]
    node_events = [b.node(f"n{i}", g) for i, g in enumerate(nodes)]
    job_events = [b.submitted(f"j{i}", g) for i, g in enumerate(jobs)]
    state = fold(*node_events, *job_events)
    decided = plan(state, now=1, policy=POLICY_FIRST_FIT)

    taken = [(a.node_id, g) for a in decided.admissions for g in a.gpus]
    assert len(taken) == len(set(taken))
    for a in decided.admissions:
        assert len(a.gpus) == state.jobs[a.job_id].spec.gpus
    assert {a.job_id for a in decided.admissions} | {p.job_id for p in decided.pending} == set(
        state.pending
    )

    # Registering nodes in another order gives byte-identical decisions.
    shuffled = list(node_events)
    order.shuffle(shuffled)
    again = plan(fold(*shuffled, *job_events), now=1, policy=POLICY_FIRST_FIT)
    assert msgspec.json.encode(again) == msgspec.json.encode(decided)
