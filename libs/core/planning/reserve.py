"""Phase 3: the highest-ranked job that does not fit gets a reservation: the GPUs it will
take at the earliest time running jobs' declared ``max_runtime`` free enough of them. Those
of them free now are set aside: later jobs start on them only when their own
``max_runtime`` ends before the reservation starts (backfill, R5), or when they may be
lent them until then (``Cycle.may_be_lent``).

Where the policy asks for more (``reservations``), the next jobs short of room get further
reservations, in queue order, as Slurm's backfill plans a start for every job it looks at:
each where it would start once the GPUs running jobs free come free, less those the
reservations before it count on. One job of many GPUs protected alone leaves the next ones
to wait behind every small job that backfills; each further reservation keeps such a job's
GPUs from work that would outlast its start, on the same terms (docs/adr/0045)."""

import bisect

from allot.core.model import JobRecord, QueueEntry, queue_entry
from allot.core.placement import Capacity
from allot.core.planning.cycle import Cycle, JobShape, Reservation, shape_of
from allot.core.planning.memo import ReleaseKey, Releases, Reserved
from allot.proto.events import Placement

RESERVATION_TRIES = 3  # each copies the free GPUs once: a few milliseconds on 1,000 nodes


def may_reserve(cycle: Cycle) -> bool:
    """One reservation per cycle. When the head job has no estimate (what it waits for is
    held by jobs without a declared runtime), the next few may try, so that one unknowable
    job does not leave every other large job unprotected."""
    return cycle.reservation is None and cycle.reservation_tries < RESERVATION_TRIES


def reserve(cycle: Cycle, job: JobRecord, models: list[str]) -> None:
    """Set aside for ``job`` the GPUs it will take once enough running jobs have ended, by
    their declared runtimes; without declared runtimes there is no estimate and nothing is
    set aside."""
    cycle.reservation_tries += 1
    if not cycle.policy.backfill:
        return
    releases = _releases(cycle)
    known = cycle.holders.reservations
    shape = shape_of(job.spec)
    key = _reservation_key(cycle, shape, models)
    if key in known:
        reserved = known[key]
    else:
        reserved = known[key] = _find_reservation(cycle.capacity, shape, models, releases)
    if reserved is None:
        return
    starts_at, found = reserved
    set_aside = _set_aside(cycle, found)
    cycle.reservation = Reservation(
        job_id=job.job_id, starts_at=starts_at, placements=found, set_aside=set_aside
    )


def may_reserve_further(cycle: Cycle, job: JobRecord) -> bool:
    """Whether the job, short of room, gets a further reservation: the first one was made,
    and fewer than the policy's ``reservations`` so far."""
    return (
        len(cycle.further) + 1 < cycle.policy.reservations
        and cycle.reservation is not None
        and cycle.reservation.job_id != job.job_id
        and cycle.policy.backfill
    )


def reserve_further(cycle: Cycle, job: JobRecord, models: list[str]) -> None:
    """Set aside for ``job`` the GPUs it will take once enough running jobs have ended, of
    those no earlier reservation counts on (those stay taken: when the earlier ones end is
    not counted, so this estimate is late rather than early). A shape that found no such
    start finds none later in the cycle either, while free GPUs and releases only shrink:
    until a held job starts or its hold is let go (``judge._consider_held``)."""
    shape = shape_of(job.spec)
    tried = (shape, tuple(models))
    if tried in cycle.further_unplaced:
        return
    released = _releases(cycle)  # first: whether they depend on the time is part of the key
    earlier = [r for r in (cycle.reservation, *cycle.further) if r is not None]
    # What it depends on besides the first's key: what the earlier ones count on and set aside.
    key = (
        *_reservation_key(cycle, shape, models),
        tuple((_placed(r.placements), _placed(r.set_aside)) for r in earlier),
    )
    known = cycle.holders.reservations
    if key in known:
        reserved = known[key]
    else:
        counted_on: dict[str, set[int]] = {}
        for placement in (p for r in earlier for p in r.placements):
            counted_on.setdefault(placement.node_id, set()).update(placement.gpus)
        releases = [(at, kept) for at, placed in released if (kept := _less(placed, counted_on))]
        reserved = known[key] = _find_reservation(cycle.capacity, shape, models, releases)
    if reserved is None:
        cycle.further_unplaced.add(tried)
        return
    starts_at, found = reserved
    further = Reservation(
        job_id=job.job_id, starts_at=starts_at, placements=found, set_aside=_set_aside(cycle, found)
    )
    cycle.further.append(further)


def _less(placed: dict[str, list[int]], counted_on: dict[str, set[int]]) -> dict[str, list[int]]:
    """What a release frees, less the GPUs reservations count on."""
    if not any(node_id in counted_on for node_id in placed):
        return placed
    kept = {
        node_id: [g for g in gpus if g not in counted_on.get(node_id, ())]
        for node_id, gpus in placed.items()
    }
    return {node_id: gpus for node_id, gpus in kept.items() if gpus}


def _set_aside(cycle: Cycle, placements: list[Placement]) -> list[Placement]:
    """Of the GPUs a reservation will take, those free now, taken out of the free ones."""
    set_aside = []
    for placement in placements:
        space = cycle.capacity.nodes[placement.node_id]
        free_now = {g for island in space.islands for g in island}
        gpus = [g for g in placement.gpus if g in free_now]
        if gpus:
            set_aside.append(Placement(node_id=placement.node_id, gpus=gpus))
            cycle.capacity.take(placement.node_id, gpus)
    return set_aside


def _reservation_key(cycle: Cycle, shape: JobShape, models: list[str]) -> tuple[object, ...]:
    """What a reservation depends on besides the holders: the job's shape, what this cycle
    admitted before it, and the time when a release's time depends on it."""
    admitted = tuple((a.job.job_id, _placed(a.placements)) for a in cycle.admitted)
    return (shape, tuple(models), admitted, cycle.now if cycle.releases_timed else None)


def _placed(placements: list[Placement]) -> tuple[tuple[str, tuple[int, ...]], ...]:
    return tuple((p.node_id, tuple(p.gpus)) for p in placements)


def _find_reservation(
    capacity: Capacity, shape: JobShape, models: list[str], releases: Releases
) -> Reserved:
    """The first release after which the job is placed, and where. Placement is tried only
    where upper bounds of the free GPUs (a GPU released twice counts twice) leave it a
    chance; the GPUs released are given back to a copy of the free ones only then, node by
    node."""
    workers, per_worker, topology = shape
    need = workers * per_worker
    # A worker needs a node with ``room`` free: the whole job's GPUs on one node, a
    # worker's for a gang that may spread.
    one_node = workers == 1 or topology in ("nvlink", "node")
    room, slots_needed = (need, 1) if one_node else (per_worker, workers)
    counted = dict(capacity.free_by_model)  # model -> free GPUs, an upper bound
    upper: dict[str, int] = {}  # node id -> free GPUs, an upper bound, where released
    slots = capacity.slots(models, room)  # places for a worker, an upper bound
    future: Capacity | None = None
    unapplied: dict[str, list[int]] = {}  # released since the copy was last brought up
    enough = tried = False  # whether the job's model has enough GPUs; whether it was tried
    for at, placements in releases:
        roomy = False  # whether a node released to may now have room for a worker
        for node_id, gpus in placements.items():
            space = capacity.nodes.get(node_id)
            if space is None:
                continue
            counted[space.model] += len(gpus)
            was = upper.get(node_id, space.free)
            free = upper[node_id] = was + len(gpus)
            unapplied.setdefault(node_id, []).extend(gpus)
            if space.model in models:
                slots += free // room - was // room
                roomy = roomy or free >= room
        if not enough:  # it stays so once it is: releases only add
            enough = max((counted.get(m, 0) for m in models), default=0) >= need
            if not enough:
                continue
        # Until a try fails, any node may have room; after, only one that changed since
        # can make the difference (a node given to since with room was tried then).
        if slots < slots_needed or (tried and not roomy):
            continue
        tried = True
        future = future or capacity.copy()
        for node_id, gpus in unapplied.items():
            future.give(node_id, gpus)
        unapplied = {}
        found = future.place(*shape, models)
        if found is not None:
            return at, found
    return None


def _release_key(listed: tuple[int, QueueEntry, dict[str, list[int]]]) -> ReleaseKey:
    return listed[0], listed[1]


def _releases(cycle: Cycle) -> Releases:
    """When GPUs held now come free, by declared runtimes, soonest first (ties by queue
    entry)."""
    if cycle.releases[0] == len(cycle.admitted):  # nothing admitted since: the same
        return cycle.releases[1]
    ends, now = cycle.holders.ends, cycle.now
    timed = [a for a in cycle.admitted if a.job.spec.max_runtime_ns is not None]
    if not timed and ends.timeless(now):
        released = ends.released
    elif ends.timeless(now):  # what this cycle admitted, sorted into them
        order, released = list(ends.order), list(ends.released)
        for admitted in timed:
            end = now + (admitted.job.spec.max_runtime_ns or 0)
            key = (end, queue_entry(admitted.job))
            at = bisect.bisect(order, key)
            order.insert(at, key)
            released.insert(at, (end, {p.node_id: p.gpus for p in admitted.placements}))
    else:
        listed = [
            (max(now, end if end is not None else now + runtime), entry, placed)
            for end, runtime, entry, placed in ends.listed
        ]
        for admitted in timed:
            end = now + (admitted.job.spec.max_runtime_ns or 0)
            placed = {p.node_id: p.gpus for p in admitted.placements}
            listed.append((end, queue_entry(admitted.job), placed))
        released = [(end, placed) for end, _, placed in sorted(listed, key=_release_key)]
    cycle.releases_timed = released is not ends.released
    cycle.releases = (len(cycle.admitted), released)
    return released
