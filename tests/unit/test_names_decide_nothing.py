"""No decision depends on how nodes are named. Ties between nodes go to the node the log
registered first (its first registration)."""

import pytest

from allot.core import DEFAULT_POLICY, plan
from allot.core.planning import Plan
from tests import builders as b
from tests.builders import fold

S = 10**9
HOUR = 3600 * S
NOW = 100 * HOUR


def placements_of(decided: Plan) -> dict[str, list[tuple[str, list[int]]]]:
    return {a.job_id: [(p.node_id, p.gpus) for p in a.placements] for a in decided.admissions}


@pytest.mark.parametrize(("first", "second"), [("b", "a"), ("a", "b")])
def test_of_two_alike_free_nodes_a_job_goes_to_the_one_registered_first(
    first: str, second: str
) -> None:
    state = fold(b.node(first, 4), b.node(second, 4), b.submitted("j", 1))
    assert placements_of(plan(state, NOW, DEFAULT_POLICY)) == {"j": [(first, [0])]}


def test_a_node_lost_and_registered_again_keeps_its_place() -> None:
    state = fold(b.node("b", 4), b.node("a", 4), b.lost("b"), b.node("b", 4), b.submitted("j", 1))
    assert placements_of(plan(state, NOW, DEFAULT_POLICY)) == {"j": [("b", [0])]}
