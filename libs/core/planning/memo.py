"""What a planner keeps between cycles of one state, because it changes less often than
the state: fair-share standings, the quota frame, the free GPUs, when running jobs end,
and the reservations made. A plan is the same with or without it.

A memo belongs to the one ``State`` it was made for (``plan`` refuses another): what it
keeps is checked against that state's version counters (``State.nodes_version`` and the
like, which its fold rules bump), never against the identity of whichever state it is
shown."""

import bisect
from collections.abc import Callable, Iterable

from allot.core.fairshare import StandingsMemo
from allot.core.model import FeedReader, JobStatus, QueueEntry, State, queue_entry
from allot.core.placement import Capacity, Schedulable, schedulable
from allot.core.preemption import StoppableMemo
from allot.core.quota import QuotaFrame
from allot.proto.events import Placement

# A reservation found: when it starts and what it takes then; None: no estimate.
Reserved = tuple[int, list[Placement]] | None
# When GPUs held now come free: (the time, GPUs by node), soonest first.
Releases = list[tuple[int, dict[str, list[int]]]]
# Where a release comes among those at the same time: the holder's queue entry.
ReleaseKey = tuple[int, QueueEntry]


class PlanMemo:
    """What a planner keeps between the cycles of ``state``."""

    def __init__(self, state: State) -> None:
        self.state = state
        self.standings = StandingsMemo(state)
        self.stoppable = StoppableMemo()
        self._frame: tuple[tuple[int, int], QuotaFrame] | None = None
        self._nodes: tuple[int, list[Schedulable], dict[str, Schedulable]] | None = None
        self._holders: tuple[tuple[int, int], Holders] | None = None
        self._ends = KeptEnds()
        self._free: Capacity | None = None
        self._free_reader = FeedReader()  # of ``State.holder_changes``
        self._held_on: dict[str, list[str]] = {}  # holder -> its nodes, as last read

    def quota_frame(self) -> QuotaFrame:
        state = self.state
        key = (state.fair_share_version, state.nodes_version)
        if self._frame is None or self._frame[0] != key:
            self._frame = (key, QuotaFrame(state))
        return self._frame[1]

    def _schedulable(self) -> tuple[list[Schedulable], dict[str, Schedulable]]:
        """The schedulable nodes in id order, and by id."""
        state = self.state
        if self._nodes is None or self._nodes[0] != state.nodes_version:
            nodes = schedulable(state)
            self._nodes = (state.nodes_version, nodes, {node[0]: node for node in nodes})
        return self._nodes[1], self._nodes[2]

    def capacity(self) -> Capacity:
        """The free GPUs of the schedulable nodes, for a cycle to change: kept up to date
        node by node, reading again only the nodes of the holders the log changed since;
        every node after a node event."""
        state = self.state
        changed = self._free_reader.changed(state.holder_changes, state.nodes_version)
        nodes, by_id = self._schedulable()
        if changed is None or self._free is None:
            self._free = Capacity.of(state, nodes)
            self._held_on = {
                job_id: list(state.jobs[job_id].placements) for job_id in state.holders
            }
            return self._free.copy()
        touched: set[str] = set()
        for job_id in changed:
            touched.update(self._held_on.pop(job_id, ()))
            if job_id in state.holders:
                held_on = self._held_on[job_id] = list(state.jobs[job_id].placements)
                touched.update(held_on)
        for node_id in touched:
            if node_id in by_id:  # else not schedulable: not in the capacity
                self._free.refresh(*by_id[node_id])
        return self._free.copy()

    def holders(self) -> "Holders":
        """What follows from the jobs holding GPUs, kept while they stay as they are."""
        state = self.state
        key = (state.holders_version, state.nodes_version)
        if self._holders is None or self._holders[0] != key:
            kept = self._ends  # not ``self``: the memo would hold itself, and stay till collected
            self._holders = (key, Holders(state, lambda: kept.of(state)))
        return self._holders[1]


class KeptEnds:
    """When the holders end, caught up with the holders the log changed since it was last
    asked; all of them again when a node changed (a lost node changes holders without
    naming them)."""

    def __init__(self) -> None:
        self._ends = Ends()
        self._reader = FeedReader()  # of ``State.holder_changes``

    def of(self, state: State) -> "Ends":
        changed = self._reader.changed(state.holder_changes, state.nodes_version)
        if changed is None:
            self._ends, changed = Ends(), list(state.holders)
        return self._ends.update(state, changed)


class Holders:
    """What a cycle works out from the jobs holding GPUs and may reuse while they stay as
    they are: when they end (worked out once asked), and the reservations made."""

    def __init__(self, state: State, ends: Callable[[], "Ends"] | None = None):
        self._ask_ends = ends or (lambda: Ends().update(state, state.holders))
        self._ends: Ends | None = None
        # What a reservation was found for (``reserve.reservation_key``) -> what was found.
        self.reservations: dict[tuple[object, ...], Reserved] = {}

    @property
    def ends(self) -> "Ends":
        if self._ends is None:
            self._ends = self._ask_ends()
        return self._ends


class Ends:
    """When the jobs holding GPUs end by their declared runtimes (a job lent GPUs set aside
    for a reservation, when it started: it is stopped as soon as that job can start):
    ``listed`` as (the end, or None for a job admitted but not started, its runtime, its
    queue entry, its GPUs by node), and ``released`` as a cycle uses them when none has
    ended in the past (soonest first, ties by queue entry: submission, index in its array,
    and only then id, for the jobs of one batch, docs/adr/0036). Kept up to date job by job
    (``update``), not worked out again."""

    def __init__(self) -> None:
        # Job id -> its end (None: not started), runtime, queue entry, GPUs by node.
        self._entries: dict[str, tuple[int | None, int, QueueEntry, dict[str, list[int]]]] = {}
        # (end, queue entry) of the started: released's order
        self.order: list[ReleaseKey] = []
        self.released: Releases = []
        self._unstarted = 0

    def update(self, state: State, job_ids: Iterable[str]) -> "Ends":
        """Take in what ``job_ids`` hold now, if they still hold GPUs."""
        for job_id in job_ids:
            known = self._entries.pop(job_id, None)
            if known is not None and known[0] is None:
                self._unstarted -= 1
            elif known is not None:
                at = bisect.bisect_left(self.order, (known[0], known[2]))
                del self.order[at], self.released[at]
            job = state.jobs.get(job_id)
            runtime = None if job is None else job.spec.max_runtime_ns
            if job is not None and job.lent:
                runtime = 0  # it is stopped once the reservation's job can start
            if job is None or runtime is None or job_id not in state.holders:
                continue
            started = job.started_at if job.status == JobStatus.RUNNING else None
            end = None if started is None else started + runtime
            entry = queue_entry(job)
            self._entries[job_id] = (end, runtime, entry, job.placements)
            if end is None:
                self._unstarted += 1
            else:
                at = bisect.bisect_left(self.order, (end, entry))
                self.order.insert(at, (end, entry))
                self.released.insert(at, (end, job.placements))
        return self

    @property
    def listed(self) -> list[tuple[int | None, int, QueueEntry, dict[str, list[int]]]]:
        return list(self._entries.values())

    def timeless(self, now: int) -> bool:
        """Whether ``released`` holds at ``now``: every end known and none before it."""
        return not self._unstarted and (not self.order or self.order[0][0] >= now)
