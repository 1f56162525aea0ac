"""Phase 2: each job in order is placed now, or told why not.

Quota first: the job must fit its nominal quota, borrowing and lending limits (``quota``).
Then placement: whole gangs only, topology respected, best fit (``placement``). A job
that ends before the reservation starts may use the GPUs set aside for it (backfill, R5).
The first jobs short of room get reservations (``reserve``).
"""

import msgspec

from allot.core.model import JobRecord
from allot.core.planning.cycle import Cycle, JobShape, Refusal, SetAside, demand_of, shape_of
from allot.core.planning.reserve import may_reserve, may_reserve_further, reserve, reserve_further
from allot.core.quota import QuotaBlock
from allot.core.topology import model_of
from allot.proto.codes import (
    BEHIND,
    BUDGET_EXHAUSTED,
    NO_BLOCK,
    NO_FIT,
    NO_NODES,
    NODE_CORDONED,
    PREEMPTING,
    QUOTA,
    RESERVED_FOR,
    ReasonCode,
)
from allot.proto.events import Hold, Placement, ReasonParams

# Short of room: what a reservation, and preemption, can help.
SHORT_OF_ROOM: tuple[ReasonCode, ...] = (NO_FIT, NO_BLOCK, BEHIND)
_ROOM_CODES: tuple[ReasonCode, ...] = (*SHORT_OF_ROOM, RESERVED_FOR)


def consider(
    cycle: Cycle,
    job: JobRecord,
    position: int,
    borrowing: list[tuple[int, JobRecord]] | None = None,
    put_back: bool = False,
) -> None:
    """Admit the job, or tell it why it waits. With ``borrowing``: a job that would start
    but would borrow quota is put there instead, to be considered again once the jobs
    within their quota have been (own quota first, as Kueue does; a job short of room is
    told so, and may be reserved for, in its place). A job ``put_back`` that comes before
    the reservation's job in the queue may take the GPUs set aside for it, as it would
    have, looked at first."""
    held = cycle.state.holds.get(job.job_id)
    if held is not None and _consider_held(cycle, job, position, held):
        return
    ahead = put_back and cycle.reservation is not None and position < cycle.reserved_at
    found, fresh = verdict(cycle, job, cycle.may_use_set_aside(job, ahead))
    if isinstance(found, list):
        if borrowing is not None and cycle.borrows(job, found):
            borrowing.append((position, job))
            return None
        reserved = cycle.reservation
        cycle.admit(job, found, ahead=ahead)
        if reserved is not None and cycle.reservation is None:
            _reserve_again(cycle, cycle.state.jobs[reserved.job_id])
        return None
    code, params, detail = found
    if code in SHORT_OF_ROOM:
        if fresh and may_reserve(cycle):
            reserve(cycle, job, _models(cycle, job))
            cycle.reserved_at = position
        elif may_reserve_further(cycle, job):
            reserve_further(cycle, job, _models(cycle, job))
        reservation = cycle.reservation_of(job.job_id)
        if reservation is not None:
            detail = {**detail, "estimated_start": reservation.starts_at}
    cycle.wait(job, position, code, params, detail)


def _reserve_again(cycle: Cycle, job: JobRecord) -> None:
    """The reservation's job, after a job ahead of it took GPUs set aside for it past its
    start: reserved for again, where it can be now, and so are the further reservations'
    jobs after it, in order (theirs left out what the first counted on); each one's
    estimated start told anew."""
    further = [cycle.state.jobs[r.job_id] for r in cycle.further]
    for reservation in cycle.further:
        for placement in reservation.set_aside:
            cycle.capacity.give(placement.node_id, placement.gpus)
    cycle.further, cycle.further_unplaced = [], set()
    reserve(cycle, job, _models(cycle, job))
    for other in further:
        if may_reserve_further(cycle, other):
            reserve_further(cycle, other, _models(cycle, other))
    estimates: dict[str, int | None] = {j.job_id: None for j in (job, *further)}
    for made in (cycle.reservation, *cycle.further):
        if made is not None:
            estimates[made.job_id] = made.starts_at
    for n, waiting in enumerate(cycle.waiting):
        if waiting.reason.job_id in estimates:
            detail = {k: v for k, v in waiting.detail.items() if k != "estimated_start"}
            if (starts_at := estimates[waiting.reason.job_id]) is not None:
                detail["estimated_start"] = starts_at
            cycle.waiting[n] = msgspec.structs.replace(waiting, detail=detail)


def _models(cycle: Cycle, job: JobRecord) -> list[str]:
    """The GPU models the job's quota lets it run on."""
    return cycle.quotas.models_allowed(job.spec, cycle.models_of(job))[0]


def behind(cycle: Cycle, job: JobRecord, position: int) -> None:
    """Strict order: the job waits behind the first that did."""
    cycle.wait(job, position, BEHIND, {"need": job.spec.total_gpus})


def verdict(
    cycle: Cycle, job: JobRecord, short: SetAside
) -> tuple[list[Placement] | Refusal, bool]:
    """Where the job starts, or why it cannot; and whether that was worked out afresh.
    Free space and quota room only shrink within a cycle: a job of a demand refused before
    is refused for the same reason."""
    spec = job.spec
    demand = (demand_of(spec), short)
    known = cycle.refused.get(demand)
    if known is not None:
        refused, version = known
        if refused[0] in _ROOM_CODES and version != cycle.quotas.version:
            # Quota room shrank since: the first limit that binds is the one to tell.
            block = cycle.quotas.models_allowed(spec, cycle.models_of(job))[1]
            if block is not None:
                refused = _quota_refusal(block)
            cycle.refused[demand] = (refused, cycle.quotas.version)
        return refused, False
    found = _judge(cycle, job, short)
    if not isinstance(found, list):
        cycle.refused[demand] = (found, cycle.quotas.version)
    return found, True


def _consider_held(cycle: Cycle, job: JobRecord, position: int, held: list[Placement]) -> bool:
    """A job others are being stopped for: it starts once its GPUs are free. Whether it was
    dealt with; a hold nothing is being stopped for any more is let go."""
    cycle.keep(held, take=False)
    cycle.hold_quota(job, held, take=False)
    models = cycle.quotas.models_allowed(job.spec, cycle.models_of(job))[0]
    placements = cycle.capacity.place(*shape_of(job.spec), models)
    # Either way below, GPUs never free nor released before come free, or are released at
    # the job's end: a shape that found no further reservation may find one now.
    if placements is not None:
        cycle.admit(job, placements)
        cycle.further_unplaced.clear()
        return True
    stopping = cycle.stopping_for.get(job.job_id, 0)
    if not (stopping or _once_others_stopped(cycle, job)):
        cycle.holds.append(Hold(job_id=job.job_id, placements=[]))
        cycle.further_unplaced.clear()
        return False
    cycle.keep(held, take=True)
    cycle.hold_quota(job, held, take=True)
    cycle.wait(job, position, PREEMPTING, {}, {"stopping": stopping})
    return True


def _once_others_stopped(cycle: Cycle, job: JobRecord) -> bool:
    """Whether a held job whose own victims are gone would start once the jobs still being
    stopped for others are gone too: its victims were chosen counting them as gone (what
    quota they give back may be what it waits for), so its hold stands until then."""
    if not cycle.stopping:
        return False
    with cycle.quotas.released(cycle.stopping):
        models = cycle.quotas.models_allowed(job.spec, cycle.models_of(job))[0]
    return bool(models) and cycle.capacity.place(*shape_of(job.spec), models) is not None


def _judge(cycle: Cycle, job: JobRecord, short: SetAside) -> list[Placement] | Refusal:
    """Where the job goes now, or why it cannot."""
    spec, capacity = job.spec, cycle.capacity
    if not capacity.nodes:
        return NO_NODES, {}, {}
    if spec.flavor and spec.flavor not in capacity.free_by_model:
        unschedulable = {
            model_of(n) for n in cycle.state.nodes.values() if not n.schedulable and not n.lost
        }
        code: ReasonCode = NODE_CORDONED if spec.flavor in unschedulable else NO_NODES
        return code, {"flavor": spec.flavor}, {}
    allowed, block = cycle.quotas.models_allowed(spec, cycle.models_of(job))
    if block is not None:
        return _quota_refusal(block)
    shape = shape_of(spec)
    tried = (shape, tuple(allowed), short)
    if tried not in cycle.unplaced:
        placements = _place(cycle, shape, allowed, short)
        if placements is not None:
            return placements
        cycle.unplaced[tried] = _why(cycle, shape, allowed, short)
    code, params, detail = cycle.unplaced[tried]
    if spec.account in cycle.exhausted:
        budget: ReasonParams = {"account": cycle.exhausted[spec.account]}
        return BUDGET_EXHAUSTED, budget, {"then": code, **detail}
    return code, params, detail


def _place(
    cycle: Cycle, shape: JobShape, models: list[str], short: SetAside
) -> list[Placement] | None:
    set_aside = cycle.set_aside(short)
    if not set_aside:
        return cycle.capacity.place(*shape, models)
    # It ends before the reservations start, or it may be lent them, so it may use the GPUs
    # set aside meanwhile (those it is admitted to are no longer set aside: ``Cycle.admit``).
    with cycle.capacity.lent(set_aside):
        return cycle.capacity.place(*shape, models)


def _why(cycle: Cycle, shape: JobShape, models: list[str], short: SetAside) -> Refusal:
    """Why a job that quota allows does not fit: code, parameters, figures of the moment."""
    capacity = cycle.capacity
    workers, per_worker, topology = shape
    need = workers * per_worker
    # The first reservation, in order, whose GPUs set aside, with those of the reservations
    # before it that the job may not use, would let it fit (with nothing set aside, it would
    # be the placement that just failed, tried again).
    first, further = short
    barred = [] if first or cycle.reservation is None else [cycle.reservation]
    barred += [r for n, r in enumerate(cycle.further) if n not in further]
    lent: list[tuple[str, list[int]]] = cycle.set_aside(short)
    for reservation in barred:
        if not reservation.set_aside:
            continue
        lent += [(p.node_id, p.gpus) for p in reservation.set_aside]
        with capacity.lent(lent):
            fits = capacity.place(*shape, models)
        if fits is not None:
            return (
                RESERVED_FOR,
                {"job": reservation.job_id},
                {"estimated_start": reservation.starts_at},
            )
    free = max((capacity.free_by_model.get(m, 0) for m in models), default=0)
    if free >= need:
        largest = capacity.largest(per_worker, topology, models)
        return NO_BLOCK, {"need": need, "topology": topology}, {"largest": largest}
    if max((cycle.free_at_start.get(m, 0) for m in models), default=0) >= need:
        return BEHIND, {"need": need}, {"free": free}
    return NO_FIT, {"need": need}, {"free": free}


def _quota_refusal(block: QuotaBlock) -> Refusal:
    params: ReasonParams = {
        "account": block.account,
        "resource": block.resource,
        "need": block.need,
    }
    return QUOTA, params, {"available": block.available}
