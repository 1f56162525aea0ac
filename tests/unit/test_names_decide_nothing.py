"""No decision depends on how nodes or jobs are named. Ties between nodes go to the node the
log registered first (its first registration); ties between victims alike, to the job
submitted first."""

import msgspec
import pytest

from allot.core import DEFAULT_POLICY, plan
from allot.core.planning import Plan
from allot.proto.events import Event
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


def running(job_id: str, node: str, gpus: list[int]) -> list[Event]:
    """A batch job running on ``node`` for the last hour."""
    start = msgspec.structs.replace(b.started(job_id, node, gpus), meta=b.meta(NOW - HOUR))
    return [b.submitted(job_id, len(gpus), resumable=True), b.plan((job_id, node, gpus)), start]


@pytest.mark.parametrize(("first", "second"), [("b", "a"), ("a", "b")])
def test_of_two_alike_victims_on_two_nodes_the_one_on_the_node_registered_first_is_stopped(
    first: str, second: str
) -> None:
    state = fold(
        b.node(first, 2),
        b.node(second, 2),
        *running("x", second, [0, 1]),
        *running("y", first, [0, 1]),
        b.submitted("notebook", 2, tier="interactive", at=NOW),
    )
    decided = plan(state, NOW, DEFAULT_POLICY)
    assert [p.job_id for p in decided.preemptions] == ["y"]
    assert [(h.job_id, h.placements[0].node_id) for h in decided.holds] == [("notebook", first)]


@pytest.mark.parametrize(("first", "second"), [("y", "x"), ("x", "y")])
def test_of_two_alike_victims_on_one_node_the_one_submitted_first_is_stopped(
    first: str, second: str
) -> None:
    state = fold(
        b.node("n", 2),
        *running(first, "n", [0]),
        *running(second, "n", [1]),
        b.submitted("notebook", 1, tier="interactive", at=NOW),
    )
    decided = plan(state, NOW, DEFAULT_POLICY)
    assert [p.job_id for p in decided.preemptions] == [first]
