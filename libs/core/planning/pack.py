"""Phase 5, after the jobs owed room have picked their victims: a job that waits although
enough GPUs are free, because no node has them together (NO_BLOCK, or BEHIND jobs that took
the block it fitted), has running work moved out of its way (ground ``PACK``).

Best fit keeps large blocks free while jobs start, but not as they end: small jobs that
outlive their neighbours are left one or two to a node, and an 8-GPU job waits for a node
that may not drain for days while the GPUs it needs sit idle, spread over many nodes. A
move stops jobs on one node that can start again at once on GPUs free elsewhere; the node's
GPUs are then held for the waiting job. The moved jobs lose only what a stop costs them
(their work since the last checkpoint and a restart), and nobody waits longer.

A job is moved only if it

- can resume, runs on one node, and may be stopped now (``preemption.stoppable``: not
  inside a funded minimum runtime, not being stopped already);
- has run this attempt for ``WORTH_A_STOP`` restarts' time at least, so that a job just
  moved is not moved again at once;
- is of no more urgent tier than the waiting job, and the waiting job's account's
  preemption rules (``AccountPreemption``, docs/adr/0032) let it stop it. The rule that
  spares another account's nominal quota (P4) does not apply: a moved job keeps every GPU
  its account holds, on other nodes;
- fits, with the others moved with it, on GPUs free now on nodes of its own GPU model
  that neither the waiting job takes nor the reservation sets aside (its own reservation's
  included: those go to the jobs behind it once it starts).

The waiting job must pass the quota check as things stand, and no node the reservation
counts on for another job is emptied for it (work started there could outlast the
reservation's estimate). Of the nodes that would do, the one whose moves cost least (then
fewest jobs, then the node registered first) is chosen; for a gang that spreads over
nodes, as many of the cheapest of one GPU model as it lacks places for workers there.
Gangs that must share a rack are not packed for."""

from collections.abc import Callable

from allot.core.model import JobRecord
from allot.core.placement import Capacity
from allot.core.planning.cycle import WORTH_A_STOP, Cycle, JobShape, Waiting, shape_of
from allot.core.preemption import TIER_RANK, Stoppable, cost_of, victim_order
from allot.core.victims import Victim
from allot.proto.codes import BEHIND, NO_BLOCK, PACK, GroundCode, ReasonCode
from allot.proto.events import JobSpec, Placement, Preemption

# Enough GPUs are free, but not together (or the block it fits was taken by jobs ahead).
_SPREAD_THIN: tuple[ReasonCode, ...] = (NO_BLOCK, BEHIND)
# Where the waiting job will start, the jobs moved for it, and where each starts again.
Move = tuple[list[Placement], list[JobRecord], list[list[Placement]]]
# Of the jobs a waiting job could stop on a ground, those the accounts' rules let it.
Rules = Callable[[JobSpec, list[tuple[Victim, GroundCode]]], list[tuple[Victim, GroundCode]]]
# node id -> the jobs there that could be moved: (cost, victim order, job), cheapest first
_ByNode = dict[str, list[tuple[int, tuple[int, ...], JobRecord]]]


def pack(cycle: Cycle, running: Stoppable, chosen: set[str], rules: Rules) -> None:
    """Up to ``preemptors_per_cycle`` jobs told so, in queue order, have jobs moved for
    them. ``running``: the jobs that may be stopped now; ``chosen``: those this cycle
    stops already (added to); ``rules``: the accounts' preemption rules."""
    tries = cycle.policy.preemptors_per_cycle
    # Free GPUs only get fewer as the cycle goes: a job like one no move was found for
    # finds none either.
    failed: set[tuple[str, JobShape, tuple[str, ...], str, bool]] = set()
    state = cycle.state
    movable = _Movable(cycle, running)
    for n in cycle.in_queue_order():
        if tries == 0:
            return
        waiting = cycle.waiting[n]
        job = state.jobs[waiting.reason.job_id]
        spec = job.spec
        if waiting.reason.code not in _SPREAD_THIN or job.job_id in state.holds:
            continue
        if spec.workers > 1 and spec.topology == "rack":
            continue  # not packed for: its nodes must share a rack
        models = cycle.quotas.models_allowed(spec, cycle.models_of(job))[0]
        reservation = cycle.reservation
        own = reservation is not None and reservation.job_id == job.job_id
        alike = (spec.account, shape_of(spec), tuple(models), spec.tier, own)
        if not models or alike in failed:
            continue
        tries -= 1
        candidates = _permitted(movable.of_tier(spec.tier), spec, rules)
        move = _cheapest_move(cycle, job, models, own, candidates, chosen)
        if move is None:
            failed.add(alike)
            continue
        _carry_out(cycle, job, waiting, n, move, chosen)


def _carry_out(
    cycle: Cycle, job: JobRecord, waiting: Waiting, n: int, move: Move, chosen: set[str]
) -> None:
    """Stop the jobs moved, and hold the GPUs the waiting job will take."""
    placements, moved, destinations = move
    stopped = [Preemption(job_id=m.job_id, code=PACK, params={"for": job.job_id}) for m in moved]
    chosen.update(m.job_id for m in moved)
    cycle.stop_for(job, waiting.position, n, stopped, placements)
    # Kept, for the rest of this cycle, for the jobs moved: no later move counts on them.
    for destination in destinations:
        for p in destination:
            cycle.capacity.take(p.node_id, p.gpus)


class _Movable:
    """The jobs that could be moved, by node, cheapest first: worked out once a cycle for
    each tier of waiting job (the jobs of no more urgent tier than it)."""

    def __init__(self, cycle: Cycle, running: Stoppable):
        self.cycle, self.running = cycle, running
        self._by_tier: dict[str, _ByNode] = {}

    def of_tier(self, tier: str) -> _ByNode:
        known = self._by_tier.get(tier)
        if known is None:
            known = self._by_tier[tier] = self._listed(TIER_RANK[tier])
        return known

    def _listed(self, rank: int) -> _ByNode:
        now, policy = self.cycle.now, self.cycle.policy
        restart_ms = policy.restart_overhead_ns // 1_000_000
        settled = now - policy.restart_overhead_ns * WORTH_A_STOP  # started by then
        by_node: _ByNode = {}
        for job in self.running.jobs:
            spec = job.spec
            one_node = spec.workers == 1 and len(job.placements) == 1
            started = job.started_at if job.started_at is not None else now
            if spec.resumable and one_node and TIER_RANK[spec.tier] >= rank and started <= settled:
                node_id = next(iter(job.placements))
                cost = cost_of(job, now, restart_ms)
                by_node.setdefault(node_id, []).append((cost, victim_order(job), job))
        for listed in by_node.values():
            listed.sort(key=lambda m: m[:2])
        return by_node


def _permitted(movable: _ByNode, spec: JobSpec, rules: Rules) -> _ByNode:
    """Of the jobs that could be moved, those the accounts' rules let ``spec`` stop."""
    owed: list[tuple[Victim, GroundCode]] = [
        (Victim(job_id=job.job_id, placements=job.placements, cost=cost), PACK)
        for listed in movable.values()
        for cost, _, job in listed
    ]
    allowed = {victim.job_id for victim, _ in rules(spec, owed)}
    if len(allowed) == len(owed):
        return movable
    kept = {node: [m for m in listed if m[2].job_id in allowed] for node, listed in movable.items()}
    return {node: listed for node, listed in kept.items() if listed}


def _cheapest_move(
    cycle: Cycle,
    job: JobRecord,
    models: list[str],
    own: bool,
    movable: _ByNode,
    chosen: set[str],
) -> Move | None:
    """The cheapest move that gives ``job`` room, or None. A job on one node needs one
    node emptied enough; a gang that spreads, as many nodes of one model as its workers
    lack places on it."""
    capacity = cycle.capacity
    reservation = cycle.reservation
    set_aside = reservation.set_aside if reservation is not None and own else []
    if set_aside:  # what is set aside for it is its own to use
        capacity = capacity.copy()
        for p in set_aside:
            capacity.give(p.node_id, p.gpus)
    workers, per_worker, topology = shape_of(job.spec)
    one_node = workers == 1 or topology in ("node", "nvlink")
    block = workers * per_worker if one_node else per_worker
    counted_on = (
        set() if reservation is None or own else {p.node_id for p in reservation.placements}
    )
    options: list[tuple[int, int, int, str, list[JobRecord]]] = []
    for node_id, listed in movable.items():  # only where some job could move
        space = capacity.nodes.get(node_id)
        if space is None or space.model not in models or node_id in counted_on:
            continue
        if space.free >= block:
            continue
        picked, freed, cost = [], space.free, 0
        for each_cost, _, running in listed:
            if freed >= block:
                break
            if running.job_id not in chosen:
                picked.append(running)
                freed += running.spec.gpus
                cost += each_cost
        if freed >= block:
            options.append((cost, len(picked), space.order, space.model, picked))
    options.sort(key=lambda o: o[:3])
    if one_node:  # the cheapest node that works
        tried = (_tried(capacity, job, models, picked, set_aside) for *_, picked in options)
        return next((move for move in tried if move is not None), None)
    for model in models:  # a gang's workers all go on one model
        on_model = [picked for *_, of, picked in options if of == model]
        lacking = workers - capacity.slots([model], per_worker)
        if 0 < lacking <= len(on_model):
            picked = [running for on_node in on_model[:lacking] for running in on_node]
            move = _tried(capacity, job, [model], picked, set_aside)
            if move is not None:
                return move
    return None


def _tried(
    capacity: Capacity,
    job: JobRecord,
    models: list[str],
    picked: list[JobRecord],
    set_aside: list[Placement],
) -> Move | None:
    """The move, tried on a copy of the free GPUs: the ``picked`` jobs' GPUs given back, the
    job placed by best fit, then each picked job whose GPUs it takes, largest first, where
    best fit puts it on its own GPU model, but not on the GPUs ``set_aside`` for the job
    that it leaves; None if any of them does not fit."""
    trial = capacity.copy()
    for running in picked:
        for node_id, gpus in running.placements.items():
            trial.give(node_id, gpus)
    placements = trial.place(*shape_of(job.spec), models)
    if placements is None:
        return None
    for p in placements:
        trial.take(p.node_id, p.gpus)
    for p in set_aside:  # what it does not take stays set aside, for the jobs behind it
        trial.take(p.node_id, p.gpus)
    taken = {(p.node_id, g) for p in placements for g in p.gpus}
    moved = []
    for running in picked:
        if taken.isdisjoint((n, g) for n, gpus in running.placements.items() for g in gpus):
            for node_id, gpus in running.placements.items():  # not in the way: it stays
                trial.take(node_id, gpus)
        else:
            moved.append(running)
    if not moved:
        return None
    destinations = []
    for running in sorted(moved, key=lambda r: (-r.spec.gpus, victim_order(r))):
        model = trial.nodes[next(iter(running.placements))].model
        found = trial.place(1, running.spec.gpus, running.spec.topology, [model])
        if found is None:
            return None
        for p in found:
            trial.take(p.node_id, p.gpus)
        destinations.append(found)
    return placements, moved, destinations
