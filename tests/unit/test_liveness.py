from allot.core import State, apply, silent_nodes
from tests import builders as b


def cluster() -> State:
    state = State()
    for seq, event in enumerate([b.node("n1"), b.node("n2"), b.node("n3"), b.lost("n3")], 1):
        apply(state, seq, event)
    return state


def test_only_nodes_silent_past_the_timeout_are_lost() -> None:
    seen = {"n1": 100.0, "n2": 104.0, "n3": 90.0}
    assert silent_nodes(cluster(), seen, now=106.0, timeout=5.0) == ["n1"]
    assert silent_nodes(cluster(), seen, now=105.0, timeout=5.0) == []  # exactly 5 s: not yet


def test_a_node_never_seen_by_this_watcher_is_not_judged() -> None:
    assert silent_nodes(cluster(), {}, now=1e9, timeout=5.0) == []


def test_a_lost_node_is_not_lost_again() -> None:
    assert "n3" not in silent_nodes(cluster(), {"n3": 0.0}, now=100.0, timeout=5.0)
