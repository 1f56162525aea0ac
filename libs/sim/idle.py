"""Why GPUs sat idle while jobs waited: the GPU time lost to occupancy, by what kept it idle.

After each moment's plan the simulator tells the tally what is free, and the free GPUs
count, until the next moment, as one of:

- ``held``: kept for jobs that stopped others, while those stop;
- ``reserved``: set aside for the job the cycle reserved room for (backfill leaves them
  alone unless a job would end before it starts);
- ``too_small``: fewer than the smallest waiting job needs;
- ``unplaced``: enough GPUs in number for some waiting job, that no plan started there
  (spread over nodes that each have too few, a quota or rule that holds the job, or a job
  past the cycle's depth).

Only while some job waits: an idle cluster with nothing to run is not a scheduler's fault,
as the occupancy metric has it. Each is reported as a share of the GPU time available while
jobs waited, so the four add up to about what occupancy misses of 1 (a stopping job's GPUs
count as busy here until it has stopped).
"""

from collections.abc import Iterable, Iterator

from allot.core.model import State
from allot.core.planning.cycle import Reservation
from allot.core.quota import GPU
from allot.proto.events import Placement

KINDS = ("held", "reserved", "too_small", "unplaced")
NS_PER_S = 1_000_000_000


class IdleTally:
    def __init__(self) -> None:
        self.gpu_s = dict.fromkeys(KINDS, 0.0)
        self.available_gpu_s = 0.0  # while jobs waited
        self._since: int | None = None
        self._idle: tuple[int, int, int, int] = (0, 0, 0, 0)  # GPUs of each kind
        self._available = 0  # GPUs there, while jobs wait
        self._capacity: tuple[int, int] = (-1, 0)  # (nodes version, GPUs of live nodes)

    def observe(self, state: State, now: int, reservations: list[Reservation]) -> None:
        """The free GPUs after the plan at ``now``, counted until the next observation."""
        if self._since is not None:
            seconds = (now - self._since) / NS_PER_S
            for kind, gpus in zip(KINDS, self._idle, strict=True):
                self.gpu_s[kind] += gpus * seconds
            self.available_gpu_s += self._available * seconds
        self._since = now
        self._idle, self._available = (0, 0, 0, 0), 0
        if state.pending:
            self._available = self._live_gpus(state)
            self._idle = self._classify(state, self._available, reservations)

    def shares(self) -> dict[str, float]:
        """Each kind's idle GPU time over the GPU time available while jobs waited."""
        available = self.available_gpu_s
        return {
            f"idle_{k}": gpu_s / available if available else 0.0 for k, gpu_s in self.gpu_s.items()
        }

    def _live_gpus(self, state: State) -> int:
        version, capacity = self._capacity
        if version != state.nodes_version:
            capacity = sum(len(n.gpus) for n in state.nodes.values() if not n.lost)
            self._capacity = (state.nodes_version, capacity)
        return capacity

    @staticmethod
    def _classify(
        state: State, capacity: int, reservations: list[Reservation]
    ) -> tuple[int, int, int, int]:
        used = sum(held.get(GPU, 0) for path, held in state.quota_used.items() if "/" not in path)
        free = max(0, capacity - used)
        held = min(free, sum(map(len, _free_of(state, state.holds.values()))))
        set_aside = sum(len(p.gpus) for r in reservations for p in r.set_aside)
        reserved = min(free - held, set_aside)
        rest = free - held - reserved
        fits = bool(state.sized_queues) and min(state.sized_queues) <= rest
        return held, reserved, 0 if fits else rest, rest if fits else 0


def _free_of(state: State, holds: Iterable[list[Placement]]) -> Iterator[list[int]]:
    """Of the GPUs kept for held jobs, those free already (their victims still hold the
    rest while they stop)."""
    for kept in holds:
        for placement in kept:
            node = state.nodes.get(placement.node_id)
            if node is not None:
                yield [g for g in placement.gpus if g not in node.allocated]
