"""Where a gang fits: the free GPUs of a planning cycle and best-fit placement on them.

Rules, in order:

1. A worker's GPUs are on one node; a gang is placed whole or not at all (R3), all on one
   GPU model.
2. ``nvlink``: every GPU of the job in one NVLink island. ``node``: all on one node.
   ``rack``: all nodes in one rack. ``any``: anywhere (R4).
3. Best fit, so large blocks stay free: the node with the fewest free GPUs that holds the
   whole job (then the one registered first); inside it, the smallest island that holds it,
   else the fewest islands. A gang too large for one node goes to the rack (for ``rack``)
   with the least room that holds it, filling its roomiest nodes first and the tail into the
   node that fits it best.
4. Models are tried in name order; for a single node the best fit over all of them wins.

Nodes alike in every other way go in the order the log registered them
(``NodeRecord.registered_seq``), never by node id: renaming every node changes no decision.
"""

import bisect
from collections.abc import Iterable
from operator import attrgetter

from allot.core.model import NodeRecord, State
from allot.core.topology import islands_of, model_of, rack_of
from allot.proto.events import Placement, Topology


class NodeSpace:
    """The free GPUs of one schedulable node, island by island."""

    __slots__ = ("free", "home", "islands", "model", "node_id", "order", "rack")

    def __init__(
        self,
        node_id: str,
        order: int,
        model: str,
        rack: str,
        islands: list[list[int]],
        home: dict[int, int],
    ):
        self.node_id = node_id
        self.order = order  # its registration's log sequence: what breaks ties between nodes
        self.model = model
        self.rack = rack
        self.islands = islands  # free indices of each island, ascending
        self.home = home  # GPU index -> its island's position in ``islands``; never changes
        self.free = sum(len(i) for i in islands)

    def copy(self) -> "NodeSpace":
        islands = [list(i) for i in self.islands]
        return NodeSpace(self.node_id, self.order, self.model, self.rack, islands, self.home)

    def pick(self, need: int, one_island: bool) -> list[int] | None:
        """The GPUs a block of ``need`` would take here, or None."""
        fitting = [island for island in self.islands if len(island) >= need]
        if fitting:
            return min(fitting, key=lambda island: (len(island), island[0]))[:need]
        if one_island or self.free < need:
            return None
        picked: list[int] = []
        for island in sorted(
            (i for i in self.islands if i), key=lambda island: (-len(island), island[0])
        ):
            picked.extend(island[: need - len(picked)])
            if len(picked) == need:
                break
        return sorted(picked)


class Capacity:
    """The free GPUs of the schedulable nodes, indexed by model and free count so that a
    best fit is found without scanning every node.

    Spaces are copied on write: a copy of the capacity, and the full nodes of a busy
    cluster (``Capacity.of``), share their spaces until one side changes one. Read
    ``nodes``; change it only with ``take`` and ``give``."""

    def __init__(self, spaces: Iterable[NodeSpace], shared: Iterable[str] = ()):
        """``spaces`` in registration order."""
        self.nodes: dict[str, NodeSpace] = {}
        self._shared = set(shared)  # node ids whose space another capacity may read
        self.free_by_model: dict[str, int] = {}
        # model -> free -> (order, node id) of the nodes with that many free, in order
        self._by_free: dict[str, dict[int, list[tuple[int, str]]]] = {}
        for space in spaces:
            self.nodes[space.node_id] = space
            self.free_by_model[space.model] = self.free_by_model.get(space.model, 0) + space.free
            if space.free:
                self._by_free.setdefault(space.model, {}).setdefault(space.free, []).append(
                    (space.order, space.node_id)
                )
        self.models = sorted(self.free_by_model)  # the GPU models it has, by name

    @classmethod
    def of(cls, state: State, nodes: "list[Schedulable] | None" = None) -> "Capacity":
        """The free GPUs of ``state``'s ``schedulable`` nodes (worked out if not given)."""
        spaces, full = [], []
        for node_id, node, shape in schedulable(state) if nodes is None else nodes:
            space = _space_of(node_id, node, shape)
            spaces.append(space)
            if not space.free:
                full.append(node_id)
        return cls(spaces, full)

    def refresh(self, node_id: str, node: NodeRecord, shape: "_Shape") -> None:
        """Read again what is free on one of the nodes (one whose holders changed)."""
        self._unindex(self.nodes[node_id])
        self.free_by_model[shape[2]] -= self.nodes[node_id].free
        space = self.nodes[node_id] = _space_of(node_id, node, shape)
        self.free_by_model[shape[2]] += space.free
        self._index(space)
        if space.free:
            self._shared.discard(node_id)
        else:
            self._shared.add(node_id)  # every capacity's full space: never written

    def copy(self) -> "Capacity":
        """An independent copy (its index copied, not rebuilt, and its spaces shared until
        written: reservations copy often)."""
        twin = Capacity(())
        twin.nodes = dict(self.nodes)
        # Both now read the same spaces: each copies one before it first changes it.
        self._shared, twin._shared = set(self.nodes), set(self.nodes)
        twin.free_by_model, twin.models = dict(self.free_by_model), self.models
        twin._by_free = {
            model: {free: list(nodes) for free, nodes in by_free.items()}
            for model, by_free in self._by_free.items()
        }
        return twin

    def take(self, node_id: str, gpus: list[int]) -> None:
        space = self._own(node_id)
        self._unindex(space)
        taken = set(gpus)
        space.islands = [[i for i in island if i not in taken] for island in space.islands]
        removed = space.free - sum(len(island) for island in space.islands)
        space.free -= removed
        self.free_by_model[space.model] -= removed
        self._index(space)

    def give(self, node_id: str, gpus: list[int]) -> None:
        """GPUs become free again (released in an estimate, or handed back by a trial)."""
        if node_id not in self.nodes:
            return
        space = self._own(node_id)
        self._unindex(space)
        for index in gpus:
            if index not in space.home:
                continue  # not a GPU of this node (any more): nothing to give back
            island = space.islands[space.home[index]]
            if index not in island:
                bisect.insort(island, index)
                space.free += 1
                self.free_by_model[space.model] += 1
        self._index(space)

    def lent(self, gpus_by_node: Iterable[tuple[str, list[int]]]) -> "Lent":
        """For a trial: these GPUs count as free inside the ``with``, and as taken again
        after it, whatever the trial placed (``with capacity.lent(...): capacity.place(...)``).
        The one way a planner tries what freeing GPUs would allow, and undoes it."""
        return Lent(self, [(node, gpus) for node, gpus in gpus_by_node if node in self.nodes])

    def place(
        self, workers: int, per_worker: int, topology: Topology, models: Iterable[str]
    ) -> list[Placement] | None:
        """The best-fit placement of a gang, or None when it does not fit."""
        need = workers * per_worker
        models = [m for m in models if self.free_by_model.get(m, 0) >= need]
        single = [
            found
            for model in models
            if (found := self._one_node(model, need, topology == "nvlink")) is not None
        ]
        if single:
            space, gpus = min(single, key=lambda found: (found[0].free, found[0].order))
            return [Placement(node_id=space.node_id, gpus=gpus)]
        if topology in ("nvlink", "node") or workers == 1:
            return None
        for model in models:
            spread = self._spread(model, workers, per_worker, topology == "rack")
            if spread is not None:
                return spread
        return None

    def fits_with(
        self,
        workers: int,
        per_worker: int,
        topology: Topology,
        models: Iterable[str],
        freed: Iterable[tuple[str, list[int]]],
    ) -> bool:
        """Whether ``place`` would find room for the gang were the ``freed`` GPUs (by node)
        free too: what ``with self.lent(freed): self.place(...) is not None`` says, worked
        out without giving them and taking them back (the victim search asks it of many
        sets of victims, and needs no placement)."""
        need = workers * per_worker
        one_island = topology == "nvlink"
        grown = self._grown(freed)
        for model in models:
            sizes = {n: s for n, s in grown.items() if self.nodes[n].model == model}
            added = sum(sum(s) - self.nodes[n].free for n, s in sizes.items())
            if self.free_by_model.get(model, 0) + added < need:
                continue
            # Giving GPUs only adds room: a node that holds the job already still does.
            if self._one_node(model, need, one_island) is not None:
                return True
            if any((max(s, default=0) if one_island else sum(s)) >= need for s in sizes.values()):
                return True
            spreads = workers > 1 and topology not in ("nvlink", "node")
            if not spreads:
                continue
            slots = self._spread_slots(model, per_worker, topology == "rack", sizes)
            if max(slots, default=0) >= workers:
                return True
        return False

    def _grown(self, freed: Iterable[tuple[str, list[int]]]) -> dict[str, list[int]]:
        """Node id -> the sizes of its islands were ``freed`` free too, for the nodes given
        to (what ``give`` would count: this node's GPUs, each once)."""
        added: dict[str, set[int]] = {}
        nodes = self.nodes
        for node_id, gpus in freed:
            space = nodes.get(node_id)
            if space is None:
                continue
            known = added.get(node_id)
            if known is None:
                added[node_id] = space.home.keys() & gpus
            else:
                known.update(space.home.keys() & gpus)
        grown: dict[str, list[int]] = {}
        for node_id, given in added.items():
            space = nodes[node_id]
            sizes = [len(island) for island in space.islands]
            if space.free:  # a full node (most, on a busy cluster) has none free already
                given = given.difference(*space.islands)
            home = space.home
            for index in given:
                sizes[home[index]] += 1
            grown[node_id] = sizes
        return grown

    def _spread_slots(
        self, model: str, per_worker: int, one_rack: bool, grown: dict[str, list[int]]
    ) -> list[int]:
        """Workers of ``per_worker`` GPUs the nodes of a model could hold, each on one node,
        with the nodes in ``grown`` at those island sizes: in all, or rack by rack."""
        free = {space.node_id: space.free for space in self._spaces(model)}
        free.update((node_id, sum(sizes)) for node_id, sizes in grown.items())
        racks: dict[str, int] = {}
        for node_id, count in free.items():
            key = self.nodes[node_id].rack if one_rack else ""
            racks[key] = racks.get(key, 0) + count // per_worker
        return list(racks.values())

    def slots(self, models: Iterable[str], per_worker: int) -> int:
        """How many workers of ``per_worker`` GPUs the free GPUs of nodes of ``models``
        could hold, each on one node, islands aside."""
        return sum(
            free // per_worker * len(nodes)
            for model in models
            for free, nodes in self._by_free.get(model, {}).items()
        )

    def largest(self, per_worker: int, topology: Topology, models: Iterable[str]) -> int:
        """The largest block free now for this shape: what a waiting job is told it lacks."""
        best = 0
        for model in models:
            spaces = self._spaces(model)
            if topology == "nvlink":
                best = max([best, *(len(i) for s in spaces for i in s.islands)])
            elif topology == "node":
                best = max([best, *(s.free for s in spaces)])
            else:
                racks: dict[str, int] = {}
                for s in spaces:
                    key = s.rack if topology == "rack" else ""
                    racks[key] = racks.get(key, 0) + s.free // per_worker * per_worker
                best = max([best, *racks.values()])
        return best

    # --- inside ---

    def _own(self, node_id: str) -> NodeSpace:
        """The node's space, copied first if another capacity may read it."""
        space = self.nodes[node_id]
        if node_id in self._shared:
            self._shared.discard(node_id)
            space = self.nodes[node_id] = space.copy()
        return space

    def _spaces(self, model: str) -> list[NodeSpace]:
        return [
            self.nodes[node_id]
            for nodes in self._by_free.get(model, {}).values()
            for _, node_id in nodes
        ]

    def _one_node(
        self, model: str, need: int, one_island: bool
    ) -> tuple[NodeSpace, list[int]] | None:
        buckets = self._by_free.get(model, {})
        for count in sorted(c for c in buckets if c >= need):
            for _, node_id in buckets[count]:
                space = self.nodes[node_id]
                gpus = space.pick(need, one_island)
                if gpus is not None:
                    return space, gpus
        return None

    def _spread(
        self, model: str, workers: int, per_worker: int, one_rack: bool
    ) -> list[Placement] | None:
        # (workers it holds, order, node id): by room, then registration
        room = sorted(
            (s.free // per_worker, s.order, s.node_id)
            for s in self._spaces(model)
            if s.free >= per_worker
        )
        if one_rack:
            racks: dict[str, list[tuple[int, int, str]]] = {}
            for slots, order, node_id in room:
                racks.setdefault(self.nodes[node_id].rack, []).append((slots, order, node_id))
            fitting = [
                (sum(slots for slots, _, _ in members), rack)
                for rack, members in racks.items()
                if sum(slots for slots, _, _ in members) >= workers
            ]
            if not fitting:
                return None
            room = racks[min(fitting)[1]]
        elif sum(slots for slots, _, _ in room) < workers:
            return None
        placements: list[Placement] = []
        left = workers
        while left:
            at = bisect.bisect_left(room, (left,))
            if at == len(room):  # none holds the rest: the roomiest, registered first
                at = bisect.bisect_left(room, (room[-1][0],))
            slots, _, node_id = room.pop(at)
            count = min(slots, left) * per_worker
            gpus = self.nodes[node_id].pick(count, one_island=False)
            assert gpus is not None  # it has ``slots * per_worker`` free GPUs
            placements.append(Placement(node_id=node_id, gpus=gpus))
            left -= min(slots, left)
        return placements

    def _index(self, space: NodeSpace) -> None:
        if space.free:
            bucket = self._by_free.setdefault(space.model, {}).setdefault(space.free, [])
            bisect.insort(bucket, (space.order, space.node_id))

    def _unindex(self, space: NodeSpace) -> None:
        if space.free:
            bucket = self._by_free[space.model][space.free]
            del bucket[bisect.bisect_left(bucket, (space.order, space.node_id))]
            if not bucket:
                del self._by_free[space.model][space.free]


class Lent:
    """GPUs given for the length of a ``with`` (``Capacity.lent``). A class, not a generator:
    the victim search enters one per set of victims it tries."""

    __slots__ = ("_capacity", "_gpus")

    def __init__(self, capacity: Capacity, gpus: list[tuple[str, list[int]]]):
        self._capacity, self._gpus = capacity, gpus

    def __enter__(self) -> None:
        for node_id, gpus in self._gpus:
            self._capacity.give(node_id, gpus)

    def __exit__(self, *_: object) -> None:
        for node_id, gpus in self._gpus:
            self._capacity.take(node_id, gpus)


_Shape = tuple[list[list[int]], dict[int, int], str, str]  # islands, GPU -> island, model, rack
Schedulable = tuple[str, NodeRecord, _Shape]  # a node that takes work, and its shape


def schedulable(state: State) -> list[Schedulable]:
    """The nodes that take work, in registration order, with their shapes: what changes
    only with ``State.nodes_version``, so a planner may keep it between cycles."""
    nodes = sorted(state.nodes.values(), key=_registered_seq)
    return [(node.node_id, node, _shape_of(node)) for node in nodes if node.schedulable]


_registered_seq = attrgetter("registered_seq")


# Node id -> what its shape was derived from, and the shape: a node's GPUs, islands and
# labels change only when it registers again, which gives them new lists; its GPU faults
# only by a health change, which gives them a new dict.
_shapes: dict[str, tuple[tuple[object, ...], _Shape]] = {}


# Node id -> its shape, and a space of it with every GPU taken: shared by every capacity in
# which the node is full, never written (``Capacity._own``).
_full: dict[str, tuple[_Shape, NodeSpace]] = {}


def _space_of(node_id: str, node: NodeRecord, shape: _Shape) -> NodeSpace:
    """What is free on a schedulable node."""
    taken = node.allocated
    every, home, model, rack = shape
    if taken.keys() >= home.keys():  # all taken: a busy cluster's usual node
        return _full_space(node_id, node.registered_seq, shape)
    islands = [[i for i in island if i not in taken] for island in every]
    return NodeSpace(node_id, node.registered_seq, model, rack, islands, home)


def _full_space(node_id: str, order: int, shape: _Shape) -> NodeSpace:
    known = _full.get(node_id)
    # Its order too: a node of this id in another state may have registered at another
    # point of its log, and victims are tried in the order of their nodes, full or not.
    if known is None or known[0] is not shape or known[1].order != order:
        every, home, model, rack = shape
        space = NodeSpace(node_id, order, model, rack, [[] for _ in every], home)
        known = _full[node_id] = (shape, space)
    return known[1]


def _shape_of(node: NodeRecord) -> _Shape:
    """A node's islands of healthy GPUs, which island each GPU is in, its model and its
    rack, worked out once per registration or change of health rather than every cycle."""
    known = _shapes.get(node.node_id)
    source = (node.gpus, node.nvlink_islands, node.labels, node.gpu_faults)
    if known is not None and all(a is b for a, b in zip(known[0], source, strict=True)):
        return known[1]
    # A faulty GPU is not part of the node as placement sees it: never offered, never
    # given back when its holder is stopped.
    every = [
        usable
        for island in islands_of(node)
        if (usable := [i for i in island if i not in node.gpu_faults])
    ]
    home = {index: n for n, island in enumerate(every) for index in island}
    shape = (every, home, model_of(node), rack_of(node))
    _shapes[node.node_id] = (source, shape)
    return shape
