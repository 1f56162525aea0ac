"""Phase 4: past the depth, GPUs that are still free go to the jobs that need no more than
are left, in queue order (``fill_depth`` of them at most), on the terms of phases 2 and 3.
Those that do not fit are told nothing new, as any job past the depth."""

from collections.abc import Iterable, Iterator

from allot.core.model import JobRecord
from allot.core.planning.cycle import Cycle, shape_of
from allot.core.planning.judge import verdict
from allot.core.planning.order import ordered

Queued = Iterable[tuple[int, JobRecord]]  # (position, job) in the planner's order


def fill(cycle: Cycle, limit: int, unreached: Queued) -> None:
    """Up to ``limit`` more jobs that need no more GPUs than are left (free, or set aside for
    the reservations, which a job that ends before one starts, or one they may be lent
    to, may use) start where they fit.
    ``unreached``: the jobs phases 2 and 3 did not look at, in order."""
    if cycle.no_room():
        return
    if not any(cycle.capacity.free_by_model.values()) and not _could_use_set_aside(cycle):
        return  # only GPUs set aside for reservations are free, and no job may use them
    left = _left(cycle)
    borrowing: list[JobRecord] = []  # that would start, but borrow: after the rest
    for job in not_looked_at(cycle, unreached, left):
        if limit == 0:
            break
        if job.job_id in cycle.state.holds or job.spec.total_gpus > left:
            continue  # kept for; or what is left shrank since
        limit -= 1
        admitted = len(cycle.admitted)
        if not _try(cycle, job, borrowing):
            return
        if len(cycle.admitted) != admitted:  # only an admission leaves less room
            left = _left(cycle)
    for job in borrowing:
        if job.spec.total_gpus > left:
            continue
        admitted = len(cycle.admitted)
        if not _try(cycle, job):
            return
        if len(cycle.admitted) != admitted:
            left = _left(cycle)


def not_looked_at(cycle: Cycle, unreached: Queued, left: int) -> Iterator[JobRecord]:
    """The jobs of no more than ``left`` GPUs that the cycle has not looked at, in queue
    order. Either those phases 2 and 3 did not reach, read on from where they stopped, or
    the queues of such jobs merged again, less those looked at: the first, where most jobs
    waiting are that small (the merge would pass every job looked at once more), the second
    where few are (the jobs not reached would be read to the end of the queue to find them).
    Both give the same jobs in the same order."""
    if mostly_fitting(cycle, left):
        return (job for _, job in unreached if job.spec.total_gpus <= left)
    state, looked = cycle.state, {w.reason.job_id for w in cycle.waiting}
    looked.update(a.job.job_id for a in cycle.admitted)
    queue = ordered(state, cycle.ranked, cycle.now, cycle.policy, left)
    return (job for job in queue if job.job_id not in looked)


def mostly_fitting(cycle: Cycle, left: int) -> bool:
    """Whether at least half the jobs waiting need no more than ``left`` GPUs."""
    sizes = cycle.state.sized_queues
    fitting = sum(len(q) for gpus, queues in sizes.items() if gpus <= left for q in queues.values())
    return 2 * fitting >= len(cycle.state.pending)


def _try(cycle: Cycle, job: JobRecord, borrowing: list[JobRecord] | None = None) -> bool:
    """Admit the job where it fits, or put it in ``borrowing`` if it would borrow quota;
    whether GPUs are still left for others."""
    short = cycle.may_use_set_aside(job)
    tried = (shape_of(job.spec), tuple(cycle.models_of(job)), short)
    if not cycle.quotas.by_model and tried in cycle.unplaced:
        # Its shape found no room on the models its quota allows (all, when quotas do not
        # name models; none would be a refusal anyway): refused, whatever its quota, which
        # a cycle past its depth states nothing about.
        return True
    if borrowing is not None and cycle.borrows_anywhere(job):
        # Wherever it were placed it would borrow: put back without looking for room. Should
        # it find none, it finds none when tried again at the end either (room and quota
        # only shrink in a fill), and what the fill tried is told nothing.
        borrowing.append(job)
        return True
    found, _ = verdict(cycle, job, short)
    if isinstance(found, list):
        if borrowing is not None and cycle.borrows(job, found):
            borrowing.append(job)
            return True
        cycle.admit(job, found)  # only an admission leaves less room
        return not cycle.no_room()
    return True


def _could_use_set_aside(cycle: Cycle) -> bool:
    """Whether some waiting job could use the GPUs set aside for the reservations: they
    may be lent, or a job declares a runtime that ends before one starts."""
    runtimes, reserved = cycle.state.waiting_runtimes, cycle.reservation
    if reserved is None:
        return False
    latest = max(r.starts_at for r in (reserved, *cycle.further))
    lends = cycle.lends() or any(cycle.lends(r) for r in cycle.further)
    return lends or (bool(runtimes) and cycle.now + runtimes[0] <= latest)


def _left(cycle: Cycle) -> int:
    """The most GPUs a job could get now: the free GPUs of one model, and those set aside
    for the reservations."""
    reservation = cycle.reservation
    set_aside = sum(len(p.gpus) for p in reservation.set_aside) if reservation else 0
    set_aside += sum(len(p.gpus) for r in cycle.further for p in r.set_aside)
    return max(cycle.capacity.free_by_model.values(), default=0) + set_aside
