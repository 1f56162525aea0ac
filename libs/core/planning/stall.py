"""Phase 5, after the jobs owed room have picked their victims: a reservation whose GPUs
sit idle for long, waiting for a few running jobs, has those jobs stopped (ground
``STALL``).

A large gang waits for a reservation: the GPUs it will take are set aside as they come
free, and nothing that would outlast the reservation's start may use them. Where the last
of them are held by a job with days to run, most of the gang's GPUs idle all that time, and
no ground stops that job when its account is within its share. Stopping it costs its work
since the last checkpoint and a restart; waiting costs the idle GPUs every hour.

The reservation's job has the jobs in its way stopped, and the GPUs they leave held for
it, when all of these hold:

- it declared a maximum runtime no longer than the reservation's wait, so the jobs stopped
  for it are back no later than it would otherwise have started; and that wait is at least
  ``WORTH_A_STOP`` restarts' time;
- the GPUs set aside for it and idle now, over that wait, come to ``WORTH_A_STOP`` times
  what stopping the jobs in the way costs at least, and to no fewer GPUs than those jobs
  hold;
- every job holding GPUs the reservation counts on may be stopped now
  (``preemption.stoppable``), can resume, has run this attempt ``WORTH_A_STOP`` restarts'
  time (or was lent GPUs set aside: it started knowing it would be stopped), and is of no
  more urgent tier; and the waiting job's account's rules
  (``AccountPreemption``, docs/adr/0032, P4 included: another account's nominal quota is
  its own, so none is stopped past what its account borrows) let it stop each one, and
  quota would admit it with them gone (P3);
- it is not of an account over its fair share stopping a job of an account that is not:
  else an account under its share could lose its job to every gang another account sends.

Only the reservation's job, once a cycle, and not if it stopped others this cycle already."""

from collections.abc import Callable

from allot.core.model import JobRecord
from allot.core.planning.cycle import WORTH_A_STOP, Cycle
from allot.core.planning.pack import Rules
from allot.core.preemption import TIER_RANK, Stoppable, as_victim
from allot.core.victims import Allowed, Victim
from allot.proto.codes import STALL, GroundCode
from allot.proto.events import JobSpec, Placement, Preemption

# Whether quota would admit a job with its victims gone (``preempt._admitted_once_gone``).
Admits = Callable[[JobSpec], Allowed | None]


def unstall(
    cycle: Cycle,
    running: Stoppable,
    chosen: set[str],
    rules: Rules,
    admits: Admits,
    over_share: frozenset[str],
) -> None:
    """Stop the jobs in the way of the reservation, where its idle GPUs are worth it.
    ``running``: the jobs that may be stopped now; ``chosen``: those this cycle stops
    already (added to); ``rules``: the accounts' preemption rules; ``admits``: quota's
    say, with the victims gone."""
    reservation, state, now = cycle.reservation, cycle.state, cycle.now
    if reservation is None or any(h.job_id == reservation.job_id for h in cycle.holds):
        return  # held already: it stopped others this cycle
    job = state.jobs[reservation.job_id]
    spec, overhead = job.spec, cycle.policy.restart_overhead_ns
    wait = reservation.starts_at - now
    if spec.max_runtime_ns is None or spec.max_runtime_ns > wait or wait < WORTH_A_STOP * overhead:
        return
    # Free now, and not lent: ``Cycle.admit`` takes what it lends out of ``set_aside``.
    idle = {(p.node_id, g) for p in reservation.set_aside for g in p.gpus}
    counted_on = {(p.node_id, g) for p in reservation.placements for g in p.gpus}
    in_the_way = [
        state.jobs[job_id]
        for job_id in state.holders
        if any((node_id, g) in counted_on
               for node_id, gpus in state.jobs[job_id].placements.items() for g in gpus)
    ]  # fmt: skip
    if not in_the_way or sum(j.gpu_count for j in in_the_way) > len(idle):
        return
    victims = _stoppable_for(cycle, job, in_the_way, running, chosen, over_share)
    if victims is None or len(rules(spec, victims)) < len(victims):
        return
    cost_ms = sum(victim.cost for victim, _ in victims)
    if len(idle) * (wait // 1_000_000) < WORTH_A_STOP * cost_ms:
        return
    if not _frees_room(cycle, reservation.placements, idle, in_the_way):
        return
    # Quota admits it with them gone, and no other account is stopped past what it
    # borrows (ADR 0032, P3 and P4): as the victim search asks it.
    allowed = admits(spec)
    model = cycle.capacity.nodes[reservation.placements[0].node_id].model
    if allowed is not None and not allowed([v for v, _ in victims], model, False):
        return
    n = next(n for n, w in enumerate(cycle.waiting) if w.reason.job_id == job.job_id)
    stopped = [
        Preemption(job_id=v.job_id, code=STALL, params={"for": job.job_id}) for v, _ in victims
    ]
    chosen.update(v.job_id for v, _ in victims)
    cycle.stop_for(job, cycle.waiting[n].position, n, stopped, reservation.placements)


def _stoppable_for(
    cycle: Cycle,
    job: JobRecord,
    in_the_way: list[JobRecord],
    running: Stoppable,
    chosen: set[str],
    over_share: frozenset[str],
) -> list[tuple[Victim, GroundCode]] | None:
    """The jobs in the way as victims, or None if any of them may not be stopped."""
    now, policy = cycle.now, cycle.policy
    may_stop = {j.job_id for j in running.jobs} - chosen
    settled = now - policy.restart_overhead_ns * WORTH_A_STOP  # started by then
    restart_ms = policy.restart_overhead_ns // 1_000_000
    rank, account = TIER_RANK[job.spec.tier], job.spec.account
    victims: list[tuple[Victim, GroundCode]] = []
    for other in in_the_way:
        started = other.started_at if other.started_at is not None else now
        if (
            other.job_id not in may_stop
            or not other.spec.resumable
            or (started > settled and not other.lent)  # lent: to be stopped when due
            or TIER_RANK[other.spec.tier] < rank
            or (account in over_share and other.spec.account not in over_share)
        ):
            return None
        victims.append((as_victim(other, now, restart_ms), STALL))
    return victims


def _frees_room(
    cycle: Cycle,
    placements: list[Placement],
    idle: set[tuple[str, int]],
    in_the_way: list[JobRecord],
) -> bool:
    """Whether every GPU the reservation counts on is free once the jobs in the way are
    gone: none of them held for another job, or taken this cycle."""
    free = idle | {
        (node_id, g) for other in in_the_way for node_id, gpus in other.placements.items()
        for g in gpus
    }  # fmt: skip
    return all((p.node_id, g) in free for p in placements for g in p.gpus)
