from hypothesis import given
from hypothesis import strategies as st

from allot.core import Hearing, State, judge_silence
from allot.core.liveness import MASS_SILENCE_MIN_NODES, Silence
from tests import builders as b

TIMEOUT = 10.0
LISTENING = Hearing(since=0.0)


def cluster(*node_ids: str, lost: tuple[str, ...] = ()) -> State:
    return b.fold(*[b.node(n) for n in node_ids], *[b.lost(n) for n in lost])


def judge(
    state: State, seen: dict[str, float], now: float, hearing: Hearing = LISTENING
) -> Silence:
    return judge_silence(state, seen, hearing, now=now, timeout=TIMEOUT)


def test_only_nodes_silent_past_the_timeout_are_lost() -> None:
    state = cluster("n1", "n2", "n3", "n4", "n5", lost=("n5",))
    seen = {"n1": 100.0, "n2": 106.0, "n3": 108.0, "n4": 109.0, "n5": 0.0}
    assert judge(state, seen, now=110.5).lost == ("n1",)
    assert judge(state, seen, now=110.0).lost == ()  # exactly the timeout: not yet


def test_a_node_never_seen_by_this_watcher_is_not_judged() -> None:
    assert judge(cluster("n1", "n2"), {}, now=1e9) == Silence(
        hearing=Hearing(since=0.0, looked=1e9)
    )


def test_a_lost_node_is_not_lost_again_nor_counted() -> None:
    silence = judge(cluster("n1", "n2", lost=("n2",)), {"n1": 99.0, "n2": 0.0}, now=100.0)
    assert silence.lost == ()
    assert silence.watched == 1


def test_a_single_node_that_dies_is_lost() -> None:
    assert judge(cluster("n1"), {"n1": 0.0}, now=10.5).lost == ("n1",)


def test_off_the_bus_nobody_is_judged() -> None:
    deaf = Hearing(since=None)
    assert judge(cluster("n1", "n2", "n3"), {"n1": 0.0}, now=1e9, hearing=deaf) == Silence(
        hearing=Hearing(since=None, looked=1e9)
    )


def test_the_reported_outage_loses_no_node() -> None:
    """Heartbeats until 0, the watcher off the bus from 0.2 to 12, heartbeats again at 12.5."""
    state = cluster("node-1", "node-2")
    seen = {"node-1": 0.0, "node-2": 0.0}
    deaf = Hearing(since=None)
    assert judge(state, seen, now=11.0, hearing=deaf).lost == ()
    back = Hearing(since=12.0)
    assert judge(state, seen, now=12.1, hearing=back).lost == ()  # before any heartbeat
    seen = {"node-1": 12.5, "node-2": 12.5}
    assert judge(state, seen, now=22.4, hearing=back).lost == ()


def test_after_its_return_a_dead_node_is_lost_one_full_timeout_later() -> None:
    state = cluster("n1", "n2", "n3")
    seen = {"n1": 0.0, "n2": 20.0, "n3": 20.0}  # n1 died during the watcher's absence
    back = Hearing(since=12.0)
    assert judge(state, seen, now=21.9, hearing=back).lost == ()
    assert judge(state, seen, now=22.1, hearing=back).lost == ("n1",)


def test_most_nodes_silent_together_are_held_not_lost() -> None:
    state = cluster("n1", "n2", "n3")
    silence = judge(state, {"n1": 0.0, "n2": 0.5, "n3": 20.0}, now=20.5)
    assert silence.lost == ()
    assert silence.held == ("n1", "n2")
    assert silence.quiet == ("n1", "n2")
    assert silence.watched == 3
    assert silence.hearing.holding


def test_nodes_that_died_far_apart_are_each_lost() -> None:
    state = cluster("n1", "n2", "n3")
    # n1 is past the timeout while n2 has been silent for less than half of it.
    silence = judge(state, {"n1": 0.0, "n2": 6.0, "n3": 10.0}, now=10.5)
    assert silence.lost == ("n1",)
    assert silence.held == ()


def test_every_node_gets_a_full_timeout_once_most_are_heard_again() -> None:
    state = cluster("n1", "n2")
    held = judge(state, {"n1": 0.0, "n2": 0.0}, now=12.0)
    assert held.held == ("n1", "n2")
    # n2 is heard first; n1, just as cut off, a moment later.
    heard = judge(state, {"n1": 0.0, "n2": 12.2}, now=12.5, hearing=held.hearing)
    assert heard.lost == ()
    assert heard.hearing == Hearing(since=12.5, looked=12.5)
    # If n1 stays silent after all, it is lost one full timeout later.
    hearing = heard.hearing
    for now in range(13, 23):  # the watcher looks every second
        hearing = judge(state, {"n1": 0.0, "n2": now - 0.5}, now=now, hearing=hearing).hearing
    later = judge(state, {"n1": 0.0, "n2": 22.5}, now=22.6, hearing=hearing)
    assert later.lost == ("n1",)


def test_a_watcher_that_did_not_look_for_a_long_while_was_deaf_meanwhile() -> None:
    """Its own event loop stalled past the timeout: the one node's heartbeats of that time
    wait unread, and it is not lost for them."""
    state = cluster("n1")
    looked = judge(state, {"n1": 0.0}, now=1.0)
    assert looked.hearing == Hearing(since=0.0, looked=1.0)
    stalled = judge(state, {"n1": 0.0}, now=13.0, hearing=looked.hearing)
    assert stalled.lost == ()
    assert stalled.stalled == 12.0
    # If it stays silent once the watcher looks again, it is lost one full timeout later.
    hearing = stalled.hearing
    for now in (14.0, 18.0, 22.0):
        hearing = judge(state, {"n1": 0.0}, now=now, hearing=hearing).hearing
    assert judge(state, {"n1": 0.0}, now=23.1, hearing=hearing).lost == ("n1",)


def test_looks_close_together_are_no_stall() -> None:
    state = cluster("n1")
    hearing = LISTENING
    for now in (5.0, 9.0, 10.5):
        silence = judge(state, {"n1": 0.0}, now=now, hearing=hearing)
        hearing = silence.hearing
    assert silence.stalled == 0.0
    assert silence.lost == ("n1",)


node_ids = st.lists(st.sampled_from([f"n{i}" for i in range(8)]), min_size=1, unique=True)


@st.composite
def watches(draw: st.DrawFn) -> tuple[State, dict[str, float], Hearing, float]:
    nodes = draw(node_ids)
    gone = draw(st.lists(st.sampled_from(nodes), unique=True))
    seen = {n: draw(st.floats(0, 100)) for n in draw(st.lists(st.sampled_from(nodes), unique=True))}
    since = draw(st.none() | st.floats(0, 100))
    looked = draw(st.none() | st.floats(since or 0, 200))
    hearing = Hearing(since=since, holding=draw(st.booleans()), looked=looked)
    now = draw(st.floats(max(100, looked or 0), 200))
    return cluster(*nodes, lost=tuple(gone)), seen, hearing, now


@given(watches())
def test_only_evidence_heard_while_listening_declares_a_node_lost(
    watch: tuple[State, dict[str, float], Hearing, float],
) -> None:
    state, seen, hearing, now = watch
    silence = judge(state, seen, now=now, hearing=hearing)
    if hearing.since is None:
        assert silence.lost == silence.held == ()
        return
    for node_id in silence.lost:
        assert not state.nodes[node_id].lost
        assert now - max(seen[node_id], hearing.since) > TIMEOUT
    # Never most of the cluster at once.
    assert len(silence.lost) < MASS_SILENCE_MIN_NODES or 2 * len(silence.lost) <= silence.watched
    assert not (silence.lost and silence.held)
    assert list(silence.lost) == sorted(silence.lost)
    assert set(silence.lost) | set(silence.held) <= set(silence.quiet)


@given(watches())
def test_a_node_heard_within_the_timeout_is_never_lost(
    watch: tuple[State, dict[str, float], Hearing, float],
) -> None:
    state, seen, hearing, now = watch
    fresh = {n: t for n, t in seen.items() if now - t <= TIMEOUT}
    assert not set(judge(state, seen, now=now, hearing=hearing).lost) & set(fresh)
