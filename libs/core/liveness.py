"""When a node counts as lost: silence longer than the timeout, heard by a watcher that
could have heard it (docs/adr/0012).

Silence is evidence only while the watcher is on the bus: one that was away heard nobody,
which says nothing about the nodes. So a node's silence counts from the later of its last
sign of life and the moment the watcher last (re)joined the bus, and a watcher off the bus
judges nobody. A watcher that did not look for a long while (a paused process, a stalled
event loop, an overloaded machine) was as deaf meanwhile: the heartbeats of that time wait
unread in its socket, so their silence too counts from its return. When most nodes fall
silent together, the likelier cause is the bus between them and the watcher, not many
machines failing in the same few seconds: then no node is declared lost, and once enough
of the cluster is heard again every node gets a full timeout, as after the watcher's own
return.

Times are the caller's monotonic seconds; nothing here reads a clock.
"""

from collections.abc import Mapping

import msgspec

from allot.core.model import State

# Silent together: past half the timeout. Nodes cut off at the same instant stop within
# a heartbeat of each other, far less than that, while one that died alone well before
# the others is judged alone.
TOGETHER_FRACTION = 0.5
# Fewer silent nodes than this are judged one by one: a single node can simply die.
MASS_SILENCE_MIN_NODES = 2
# A gap between two looks longer than this fraction of the timeout is the watcher's own
# blindness, not the nodes' silence.
STALL_FRACTION = 0.5


class Hearing(msgspec.Struct, frozen=True, kw_only=True):
    """What a watcher brings to a judgement besides the signs of life it heard."""

    since: float | None  # silence counts from here; None: off the bus, so judge nobody
    holding: bool = False  # the last judgement held off a mass silence
    looked: float | None = None  # when the last judgement was made; None: none yet


class Silence(msgspec.Struct, frozen=True, kw_only=True):
    """What a watcher may conclude from the silence it heard; node ids sorted."""

    hearing: Hearing  # to bring to the next judgement
    lost: tuple[str, ...] = ()  # silent past the timeout: declare them lost
    held: tuple[str, ...] = ()  # silent past the timeout, but too many at once to judge
    quiet: tuple[str, ...] = ()  # silent together (past the fraction), held ones included
    watched: int = 0  # nodes judged: registered, not lost, seen by this watcher
    stalled: float = 0.0  # seconds since the last look, when that long a gap was blindness


def judge_silence(
    state: State, last_seen: Mapping[str, float], hearing: Hearing, *, now: float, timeout: float
) -> Silence:
    """Judge every node not yet lost that the watcher has seen (heartbeat or registration,
    ``last_seen``). A node the watcher has never seen has not had its chance yet."""
    if hearing.since is None:
        return Silence(hearing=Hearing(since=None, looked=now))
    since, stalled = hearing.since, 0.0
    if hearing.looked is not None and now - hearing.looked > timeout * STALL_FRACTION:
        since, stalled, hearing = now, now - hearing.looked, Hearing(since=now)
    silent_for = {
        node_id: now - max(last_seen[node_id], since)
        for node_id, node in sorted(state.nodes.items())
        if not node.lost and node_id in last_seen
    }
    overdue = tuple(n for n, silence in silent_for.items() if silence > timeout)
    quiet = tuple(n for n, silence in silent_for.items() if silence > timeout * TOGETHER_FRACTION)
    watched = len(silent_for)
    if len(quiet) >= MASS_SILENCE_MIN_NODES and 2 * len(quiet) > watched:
        hearing = Hearing(since=since, holding=hearing.holding or bool(overdue), looked=now)
        return Silence(hearing=hearing, held=overdue, quiet=quiet, watched=watched, stalled=stalled)
    if hearing.holding:
        # The cluster is heard again. The silence the held nodes shared is no evidence
        # against those that come back a moment after the others.
        hearing, overdue = Hearing(since=now, looked=now), ()
    else:
        hearing = Hearing(since=since, looked=now)
    return Silence(hearing=hearing, lost=overdue, quiet=quiet, watched=watched, stalled=stalled)
