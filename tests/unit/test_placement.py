"""Placement of gangs on the free GPUs of a cycle: examples first, then properties."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from allot.core import apply
from allot.core.placement import Capacity, schedulable
from allot.proto.events import Placement, Topology
from tests import builders as b
from tests.builders import fold


def placed(capacity: Capacity, workers: int, gpus: int, topology: Topology = "any") -> object:
    found = capacity.place(workers, gpus, topology, capacity.models)
    return None if found is None else [(p.node_id, p.gpus) for p in found]


def test_best_fit_picks_the_node_with_the_least_room_that_holds_the_job() -> None:
    state = fold(b.node("a", 8), b.node("b", 4), b.node("c", 2))
    assert placed(Capacity.of(state), 1, 3) == [("b", [0, 1, 2])]
    assert placed(Capacity.of(state), 1, 2) == [("c", [0, 1])]
    assert placed(Capacity.of(state), 1, 5) == [("a", [0, 1, 2, 3, 4])]


def test_inside_a_node_the_smallest_island_that_holds_the_job_is_used() -> None:
    state = fold(b.node("n", 8, islands=[[0, 1, 2, 3, 4, 5], [6, 7]]))
    assert placed(Capacity.of(state), 1, 2, "nvlink") == [("n", [6, 7])]
    assert placed(Capacity.of(state), 1, 4, "nvlink") == [("n", [0, 1, 2, 3])]
    assert placed(Capacity.of(state), 1, 7, "nvlink") is None  # no island of 7
    assert placed(Capacity.of(state), 1, 7, "node") == [("n", [0, 1, 2, 3, 4, 5, 6])]


@pytest.mark.parametrize(
    ("workers", "gpus", "topology", "expected"),
    [
        # Fits one node: the node, best fit, even when the topology allows more.
        (2, 2, "any", [("r2a", [0, 1, 2, 3])]),
        (2, 4, "node", [("r1a", [0, 1, 2, 3, 4, 5, 6, 7])]),
        # Two nodes' worth within one rack: the rack with the least room that holds it.
        (2, 8, "rack", [("r1a", list(range(8))), ("r1b", list(range(8)))]),
        (3, 4, "rack", [("r1a", list(range(8))), ("r1b", [0, 1, 2, 3])]),
        # Too large for any rack: only ``any`` may span racks.
        (5, 4, "rack", None),
        (5, 4, "any", [("r1a", list(range(8))), ("r1b", list(range(8))), ("r2a", [0, 1, 2, 3])]),
        (1, 16, "node", None),
    ],
)
def test_gangs_go_to_the_tightest_block_their_topology_allows(
    workers: int, gpus: int, topology: Topology, expected: object
) -> None:
    state = fold(
        b.node("r1a", 8, rack="r1"), b.node("r1b", 8, rack="r1"), b.node("r2a", 4, rack="r2")
    )
    assert placed(Capacity.of(state), workers, gpus, topology) == expected


def test_a_flavor_places_only_on_its_model_and_a_gang_never_mixes_models() -> None:
    state = fold(b.node("a", 4, model="A100"), b.node("h", 4, model="H100"))
    capacity = Capacity.of(state)
    assert capacity.place(1, 4, "any", ["H100"]) == [Placement(node_id="h", gpus=[0, 1, 2, 3])]
    assert capacity.place(2, 4, "any", ["A100", "H100"]) is None  # 4 + 4, but two models


def test_taken_gpus_are_not_offered_and_given_back_ones_are() -> None:
    capacity = Capacity.of(fold(b.node("n", 4)))
    capacity.take("n", [0, 1, 2])
    assert placed(capacity, 1, 2) is None
    capacity.give("n", [1])
    assert placed(capacity, 1, 2) == [("n", [1, 3])]
    assert capacity.largest(1, "node", capacity.models) == 2


def test_a_copy_and_the_capacity_it_came_from_change_apart() -> None:
    # "full" is full: busy cycles share its space until one of them changes it.
    state = fold(
        b.node("full", 2), b.node("free", 2), b.submitted("j", 2), b.plan(("j", "full", [0, 1]))
    )
    first, second = Capacity.of(state), Capacity.of(state)
    copy = first.copy()
    copy.give("full", [0])
    copy.take("free", [0, 1])
    first.give("full", [1])
    assert placed(copy, 1, 1) == [("full", [0])]
    assert placed(first, 1, 2) == [("free", [0, 1])]
    assert placed(first, 1, 1) == [("full", [1])]
    assert placed(second, 1, 1) == [("free", [0])]  # nothing given back to "full" here
    assert second.largest(1, "node", second.models) == 2


def test_a_node_read_again_as_full_is_shared_and_one_with_room_is_its_own() -> None:
    state = fold(b.node("n", 2), b.submitted("j", 2))
    capacity = Capacity.of(state)
    apply(state, state.seq + 1, b.plan(("j", "n", [0, 1])))
    ((_, node, shape),) = schedulable(state)
    capacity.refresh("n", node, shape)
    assert capacity.free_by_model == {"SIM": 0}
    capacity.give("n", [0])  # into a copy of the space every full "n" shares
    assert placed(capacity, 1, 1) == [("n", [0])]
    assert placed(Capacity.of(state), 1, 1) is None
    apply(state, state.seq + 1, b.exited("j", "n"))
    capacity.refresh("n", state.nodes["n"], shape)
    capacity.take("n", [1])  # its own space now: nobody else sees this
    assert placed(capacity, 1, 1) == [("n", [0])]
    assert placed(Capacity.of(state), 1, 2) == [("n", [0, 1])]


shapes = st.tuples(
    st.integers(1, 4),
    st.sampled_from([1, 2, 4, 8]),
    st.sampled_from(["nvlink", "node", "rack", "any"]),
)


@settings(max_examples=150, deadline=None)
@given(
    nodes=st.lists(
        st.tuples(st.sampled_from([4, 8]), st.sampled_from(["r1", "r2"]), st.booleans()),
        min_size=1,
        max_size=6,
    ),
    jobs=st.lists(shapes, max_size=10),
)
def test_no_gpu_twice_gangs_whole_and_topology_kept(
    nodes: list[tuple[int, str, bool]], jobs: list[tuple[int, int, Topology]]
) -> None:
    events = [
        b.node(
            f"n{i}",
            g,
            rack=rack,
            islands=[list(range(g // 2)), list(range(g // 2, g))] if split else None,
        )
        for i, (g, rack, split) in enumerate(nodes)
    ]
    state = fold(*events)
    capacity = Capacity.of(state)
    used: set[tuple[str, int]] = set()
    for workers, gpus, topology in jobs:
        found = capacity.place(workers, gpus, topology, capacity.models)
        if found is None:
            continue
        for p in found:
            capacity.take(p.node_id, p.gpus)
        cells = [(p.node_id, g) for p in found for g in p.gpus]
        assert not used & set(cells)
        assert len(cells) == len(set(cells))
        used |= set(cells)
        # Whole: every worker, each on one node.
        assert len(cells) == workers * gpus
        assert all(len(p.gpus) % gpus == 0 for p in found)
        if topology in ("nvlink", "node"):
            assert len(found) == 1
        if topology == "nvlink":
            islands = state.nodes[found[0].node_id].nvlink_islands
            assert any(set(found[0].gpus) <= set(island) for island in islands)
        if topology == "rack":
            assert len({state.nodes[p.node_id].labels["rack"] for p in found}) == 1


def test_a_node_registering_again_with_other_islands_is_placed_by_its_new_shape() -> None:
    state = fold(b.node("n1", 4, islands=[[0, 1], [2, 3]]))
    assert Capacity.of(state).place(1, 4, "nvlink", ["SIM"]) is None
    apply(state, state.seq + 1, b.node("n1", 4, islands=[[0, 1, 2, 3]]))
    placed = Capacity.of(state).place(1, 4, "nvlink", ["SIM"])
    assert placed == [Placement(node_id="n1", gpus=[0, 1, 2, 3])]
