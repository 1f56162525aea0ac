"""Which running jobs to stop so that a waiting job can start: the cheapest set of victims
that frees room for it (``choose``), given those it may stop (``preemption.candidates``).

Cost of a victim: GPU milliseconds it would lose (since its last checkpoint, or since it
started when it cannot resume) plus a restart overhead per GPU. For a job that fits one node
the set is the cheapest that frees a block it fits (every subset of the victims on each
node is tried, branch and bound); a gang spanning nodes, or a job that needs quota more than
room, takes victims cheapest per GPU first, then drops those it turns out not to need,
dearest first. A set is chosen only if the job would be admitted with it gone: placed, and
``allowed`` (its quota, where quotas apply). Ties between sets of equal cost: fewer victims,
then the victims' ``order`` (``preemption.victim_order``), then the node registered first:
never a name, so renaming nodes and jobs changes no choice.
"""

from collections.abc import Callable, Iterable

import msgspec

from allot.core.placement import Capacity
from allot.proto.events import JobSpec, Placement

MAX_VICTIMS_PER_NODE = 10  # subsets tried per node: 2**10


class Victim(msgspec.Struct, frozen=True, kw_only=True):
    job_id: str
    placements: dict[str, list[int]]
    cost: int  # GPU-ms lost, restart overhead included
    order: tuple[int, ...] = ()  # among equal cost, the smallest is stopped first


# Whether the job, placed on GPUs of a model, would be admitted with these victims gone:
# beyond room, what quota says. With ``at_most`` it answers whether some of them might do:
# whether quota could admit the job with all of them gone, whoever else must be spared.
Allowed = Callable[[list[Victim], str, bool], bool]


def choose(
    capacity: Capacity,
    spec: JobSpec,
    models: list[str],
    victims: Iterable[Victim],
    allowed: Allowed | None = None,
) -> tuple[list[Victim], list[Placement]] | None:
    """The cheapest victims whose GPUs, with what is free, place the job where ``allowed``
    says it would be admitted; and where it would go then. ``capacity`` is left as it was."""
    pool = list(victims)  # victims on unschedulable nodes are skipped as their nodes are
    if allowed is not None:  # not the models its quota would refuse with all of them gone
        models = [model for model in models if allowed(pool, model, True)]
        if not models:
            return None  # stopping any of them would lose work for nothing
    if spec.workers == 1 or spec.topology in ("nvlink", "node"):
        found = _on_one_node(capacity, spec, models, pool, allowed)
        if found is not None or allowed is None:
            return found
        # It may be quota it lacks, not room: then the victims need not be where it goes.
    if not _fits_with(capacity, spec, models, pool):
        return None  # not even with every one of them stopped: no use trying them one by one
    return _spread(capacity, spec, models, pool, allowed)


def _placed_with(
    capacity: Capacity, spec: JobSpec, models: list[str], freed: list[Victim]
) -> list[Placement] | None:
    with capacity.lent(gpus for victim in freed for gpus in victim.placements.items()):
        return capacity.place(spec.workers, spec.gpus, spec.topology, models)


def _fits_with(capacity: Capacity, spec: JobSpec, models: list[str], freed: list[Victim]) -> bool:
    """Whether ``_placed_with`` would place the job, without placing it."""
    gpus = (gpus for victim in freed for gpus in victim.placements.items())
    return capacity.fits_with(spec.workers, spec.gpus, spec.topology, models, gpus)


def _on_one_node(
    capacity: Capacity,
    spec: JobSpec,
    models: list[str],
    pool: list[Victim],
    allowed: Allowed | None,
) -> tuple[list[Victim], list[Placement]] | None:
    """Branch and bound over the victims of each node, nodes in order of a lower bound
    on their cost, so most nodes are never searched."""
    need = spec.total_gpus
    by_node: dict[str, list[Victim]] = {}
    for victim in pool:
        for node_id in victim.placements:
            by_node.setdefault(node_id, []).append(victim)
    nodes = []
    for node_id, victims in by_node.items():
        space = capacity.nodes.get(node_id)
        if space is None or space.model not in models:
            continue
        deficit = max(1, need - space.free)
        if len(victims) > MAX_VICTIMS_PER_NODE:  # only the cheapest are tried
            victims = sorted(victims, key=_cheapest_first)[:MAX_VICTIMS_PER_NODE]
        if sum(len(v.placements[node_id]) for v in victims) < deficit:
            continue  # not even all of them together free enough here
        if not _fits_with(capacity, spec, [space.model], victims):
            continue  # nor where it fits (in one NVLink island): no subset would either
        bound = _lower_bound(victims, node_id, deficit)
        nodes.append((bound, space.order, node_id, victims, deficit))
    best: _Best | None = None
    for bound, _, node_id, here, deficit in sorted(nodes, key=lambda n: (n[0], n[1])):
        if best is not None and bound > best[0][0]:
            break
        here = sorted(here, key=_cheapest_first)  # only for the few nodes searched
        search = _NodeSearch(capacity, spec, node_id, here, deficit, best, allowed)
        search.below(0, 0, 0)
        best = search.best
    return None if best is None else (best[1], best[2])


def _cheapest_first(victim: Victim) -> tuple[int, tuple[int, ...]]:
    return victim.cost, victim.order


# ((cost, victims, their orders, the node's order), victims, placements)
_Best = tuple[tuple[int, int, list[tuple[int, ...]], int], list[Victim], list[Placement]]


class _NodeSearch:
    """Depth first over a node's victims, cheapest first, pruned by the best cost so far:
    adding a victim only adds cost, so a set that places the job is not extended. An
    object, not a recursive closure, which would hold itself and leave the cycle's capacity
    to the garbage collector."""

    def __init__(
        self,
        capacity: Capacity,
        spec: JobSpec,
        node_id: str,
        here: list[Victim],
        deficit: int,
        best: _Best | None,
        allowed: Allowed | None,
    ):
        self.capacity, self.spec, self.node_id = capacity, spec, node_id
        self.here, self.deficit, self.best, self.allowed = here, deficit, best, allowed
        self.model = [capacity.nodes[node_id].model]
        self.order = capacity.nodes[node_id].order
        self.chosen: list[Victim] = []

    def below(self, start: int, cost: int, freed: int) -> None:
        """The sets of ``chosen`` and victims from ``start`` on."""
        best, chosen, node_id = self.best, self.chosen, self.node_id
        if best is not None and cost > best[0][0]:
            return
        if freed >= self.deficit:
            placed = _placed_with(self.capacity, self.spec, self.model, chosen)
            if (
                placed is not None
                and [p.node_id for p in placed] == [node_id]
                and (self.allowed is None or self.allowed(chosen, self.model[0], False))
            ):
                key = (cost, len(chosen), sorted(v.order for v in chosen), self.order)
                if best is None or key < best[0]:
                    self.best = (key, list(chosen), placed)
                return
            # Enough GPUs, but not where it fits (one NVLink island), or quota refuses it
            # still: more victims may free the rest of an island, or the quota.
        here = self.here
        for i in range(start, len(here)):
            chosen.append(here[i])
            self.below(i + 1, cost + here[i].cost, freed + len(here[i].placements[node_id]))
            chosen.pop()


def _lower_bound(victims: list[Victim], node_id: str, deficit: int) -> int:
    """No set freeing ``deficit`` GPUs on the node costs less: each GPU freed costs at
    least the cheapest victim's cost per GPU."""
    return deficit * min(v.cost // len(v.placements[node_id]) for v in victims)


def _spread(
    capacity: Capacity,
    spec: JobSpec,
    models: list[str],
    pool: list[Victim],
    allowed: Allowed | None,
) -> tuple[list[Victim], list[Placement]] | None:
    def fits() -> bool:
        roomy = any(capacity.free_by_model.get(m, 0) >= spec.total_gpus for m in models)
        if not roomy:
            return False
        placed = capacity.place(spec.workers, spec.gpus, spec.topology, models)
        return placed is not None and (
            allowed is None or allowed(chosen, capacity.nodes[placed[0].node_id].model, False)
        )

    chosen: list[Victim] = []
    try:
        for victim in sorted(pool, key=lambda v: (v.cost / _gpus(v), v.order)):
            _free(capacity, victim, True)
            chosen.append(victim)
            if fits():
                break
        else:
            return None
        for victim in sorted(chosen, key=lambda v: (v.cost, v.order), reverse=True):
            _free(capacity, victim, False)  # not needed after all?
            chosen.remove(victim)
            if not fits():
                chosen.append(victim)
                _free(capacity, victim, True)
        placed = capacity.place(spec.workers, spec.gpus, spec.topology, models)
        assert placed is not None
        return sorted(chosen, key=lambda v: v.order), placed
    finally:
        for victim in chosen:
            _free(capacity, victim, False)


def _gpus(victim: Victim) -> int:
    return sum(len(gpus) for gpus in victim.placements.values())


def _free(capacity: Capacity, victim: Victim, free: bool) -> None:
    """Count the victim's GPUs as free (or as held again) in ``capacity``."""
    for node_id, gpus in victim.placements.items():
        if node_id in capacity.nodes:
            (capacity.give if free else capacity.take)(node_id, gpus)
