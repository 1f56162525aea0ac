"""Who is stopped so that a waiting job can start: the targets of preemption, computed,
never issued (the preemptor service issues them).

A running job may be stopped for a waiting one when (codes in ``Preemption.code``):

- ``TIER``: the waiting job is of a higher tier (interactive before batch before
  best-effort, R7);
- ``FUNDED``: the waiting job would be funded and the running one is not (R8);
- ``RECLAIM``: the waiting job's account is within its nominal quota and the running one's
  account, in the same cohort, holds more than its own (R2), whatever its tier; where the
  policy ranks by fair share, the planner spares borrowers under their share when others
  suffice;
- ``FAIR_SHARE``: the running job can resume, has run past its minimum runtime and the
  policy's time slice, and its account is over its fair share while the waiting one's is
  not (R13);
- ``DRAIN``: its node is being drained (no waiting job needed, R15; ``allot.core.drain``);
- ``PACK``: it can resume, and start again at once on GPUs free elsewhere, and the waiting
  job fits the free GPUs only spread over nodes (``allot.core.planning.pack``).
- ``LENT``: it started on GPUs set aside for a reservation, whose job can now start
  (``allot.core.planning.preempt``);
- ``STALL``: it can resume, and it holds back a reservation whose GPUs set aside would idle
  far longer than its stop is worth (``allot.core.planning.stall``).

Never a job inside its minimum runtime (a funded job's protection; unfunded jobs have
none), never one already being stopped, a gang only whole, and never a job of a higher tier
but to reclaim quota. Where quotas share GPUs out, the accounts' own rules narrow this
further (``allot.core.planning.preempt``, docs/adr/0032). Which of the jobs a
waiting job may stop are stopped: the cheapest set that makes room (``allot.core.victims``).
"""

import heapq

import msgspec

from allot.core.accounts import ancestry
from allot.core.model import FeedReader, JobRecord, JobStatus, State
from allot.core.victims import Victim
from allot.proto.codes import FAIR_SHARE, FUNDED, RECLAIM, TIER, GroundCode
from allot.proto.events import TIERS, JobSpec


def cost_of(job: JobRecord, now: int, restart_overhead_ms: int) -> int:
    """GPU-ms lost by stopping the job now: since its last checkpoint if it can resume
    (the one it reported, or the last its declared interval promises, whichever is later),
    since its start if it cannot; plus the restart overhead."""
    began = job.started_at if job.started_at is not None else now
    since = began  # this attempt's
    if job.spec.resumable:
        if job.last_checkpoint_at is not None:
            since = max(since, job.last_checkpoint_at)
        interval = job.spec.checkpoint_interval_ns
        if interval:
            since = max(since, began + (now - began) // interval * interval)
    gpus = sum(map(len, job.placements.values()))  # ``gpu_count``, inlined: per victim
    return gpus * (max(0, now - since) // 1_000_000 + restart_overhead_ms)


def protected(job: JobRecord, now: int) -> bool:
    """Inside the minimum runtime its funding bought."""
    started = job.started_at if job.started_at is not None else now
    return job.funded and now - started < job.spec.min_runtime_ns


def stoppable(job: JobRecord, now: int) -> bool:
    return (
        job.status == JobStatus.RUNNING
        and job.preemption is None
        and job.stop is None
        and not job.cancel_requested
        and not protected(job, now)
    )


TIER_RANK: dict[str, int] = {tier: n for n, tier in enumerate(TIERS)}


def tier_outranks(waiting: JobSpec, running: JobSpec) -> bool:
    return TIER_RANK[waiting.tier] < TIER_RANK[running.tier]


class Grounds(msgspec.Struct, frozen=True, kw_only=True):
    """What entitles one waiting job to stop others."""

    funded: bool  # it would be funded
    reclaims_from: frozenset[str]  # accounts borrowing quota it is owed
    under_share: bool  # its account is not over its fair share
    over_share: frozenset[str]  # accounts over their fair share
    allowed: frozenset[GroundCode] = frozenset({TIER, FUNDED, RECLAIM, FAIR_SHARE})  # the policy's


class Stoppable(msgspec.Struct, kw_only=True):
    """The running jobs that may be stopped now, by job id; and what grounds could apply
    to any of them, so a waiting job with none skips the scan."""

    jobs: list[JobRecord]
    lowest_tier: int  # the least urgent tier among them (an index into TIERS), -1: none
    any_unfunded: bool
    sliced: frozenset[str]  # the resumable ones past the time slice (fair share may stop)
    sliceable: frozenset[str]  # their accounts
    now: int
    restart_overhead_ms: int


def stoppable_jobs(
    state: State, now: int, restart_overhead_ms: int, time_slice_ns: int | None
) -> Stoppable:
    """Computed once per cycle, then filtered for each waiting job by what it is owed.
    In no particular order: ``choose`` orders victims by cost and submission itself.
    ``time_slice_ns``: None where fair share stops nothing."""
    jobs = [job for job in map(state.jobs.__getitem__, state.holders) if stoppable(job, now)]
    sliced = {job.job_id: job.spec.account for job in jobs if _past_slice(job, now, time_slice_ns)}
    return _summed(jobs, sliced, now, restart_overhead_ms)


def _summed(
    jobs: list[JobRecord], sliced: dict[str, str], now: int, restart_overhead_ms: int
) -> Stoppable:
    """The stoppable ``jobs``, those of them ``sliced`` (job id -> account), and what they
    sum up to."""
    return Stoppable(
        jobs=jobs,
        lowest_tier=max((TIER_RANK[job.spec.tier] for job in jobs), default=-1),
        any_unfunded=not all(job.funded for job in jobs),
        sliced=frozenset(sliced),
        sliceable=frozenset(sliced.values()),
        now=now,
        restart_overhead_ms=restart_overhead_ms,
    )


class StoppableMemo:
    """Keeps the stoppable jobs between cycles and catches up on what changed: the holders
    the log changed since (``State.holder_changes``), and the jobs whose protection or time
    slice ended since. The same jobs as ``stoppable_jobs`` gives, in another order."""

    def __init__(self) -> None:
        self._reader = FeedReader()  # of ``State.holder_changes``
        self._now = 0
        self._stoppable: dict[str, JobRecord] = {}
        # Of those, by job: (its tier's index in TIERS, whether it is funded) as counted in...
        self._counted: dict[str, tuple[int, bool]] = {}
        self._tiers = [0] * len(TIERS)  # ...how many there are of each tier...
        self._unfunded = 0  # ...and not funded
        self._sliced: dict[str, str] = {}  # of those, the ones past their time slice -> account
        # ...as sets, and their accounts; None: to be made again
        self._sliced_sets: tuple[frozenset[str], frozenset[str]] | None = None
        self._turns: list[tuple[int, str]] = []  # (when, job): its standing may change then
        self._due: set[tuple[int, str]] = set()  # the same, to push each one once
        self._value: Stoppable | None = None

    def stoppable_jobs(
        self, state: State, now: int, restart_overhead_ms: int, time_slice_ns: int | None
    ) -> Stoppable:
        # Nodes lost or back (they change holders without naming them), other settings, or
        # a clock that went back (it would undo turns taken): read every holder again.
        basis = (state.nodes_version, restart_overhead_ms, time_slice_ns)
        changed = self._reader.changed(state.holder_changes, basis)
        if changed is None or now < self._now:
            self._stoppable, self._sliced, self._turns, self._due = {}, {}, [], set()
            self._counted, self._tiers, self._unfunded = {}, [0] * len(TIERS), 0
            self._sliced_sets = None
            changed, self._value = list(state.holders), None
        self._now = now
        while self._turns and self._turns[0][0] <= now:
            turn = heapq.heappop(self._turns)
            self._due.discard(turn)
            changed.append(turn[1])
        for job_id in changed:
            self._look_at(state, job_id, now, time_slice_ns)
        if changed or self._value is None:
            if self._sliced_sets is None:
                self._sliced_sets = frozenset(self._sliced), frozenset(self._sliced.values())
            self._value = Stoppable(
                jobs=list(self._stoppable.values()),
                lowest_tier=max((t for t, n in enumerate(self._tiers) if n), default=-1),
                any_unfunded=self._unfunded > 0,
                sliced=self._sliced_sets[0],
                sliceable=self._sliced_sets[1],
                now=now,
                restart_overhead_ms=restart_overhead_ms,
            )
        elif self._value.now != now:
            self._value = msgspec.structs.replace(self._value, now=now)
        return self._value

    def _look_at(self, state: State, job_id: str, now: int, time_slice_ns: int | None) -> None:
        """Where the job stands now, and when that may change by the clock alone."""
        if self._stoppable.pop(job_id, None) is not None:
            tier, funded = self._counted.pop(job_id)
            self._tiers[tier] -= 1
            self._unfunded -= not funded
        if self._sliced.pop(job_id, None) is not None:
            self._sliced_sets = None
        job = state.jobs.get(job_id)
        if job is None or job_id not in state.holders:
            return
        if job.started_at is not None and job.funded:
            self._turn(job.started_at + job.spec.min_runtime_ns, job_id, now)
        slice_ends = _slice_ends(job, time_slice_ns)
        if slice_ends is not None:
            self._turn(slice_ends, job_id, now)
        if stoppable(job, now):
            self._stoppable[job_id] = job
            tier, funded = self._counted[job_id] = (TIER_RANK[job.spec.tier], job.funded)
            self._tiers[tier] += 1
            self._unfunded += not funded
            if _past_slice(job, now, time_slice_ns):
                self._sliced[job_id], self._sliced_sets = job.spec.account, None

    def _turn(self, at: int, job_id: str, now: int) -> None:
        if at > now and (at, job_id) not in self._due:  # a job is looked at again often
            self._due.add((at, job_id))
            heapq.heappush(self._turns, (at, job_id))


def candidates(
    stoppable: Stoppable, waiting: JobSpec, grounds: Grounds, exclude: set[str]
) -> list[tuple[Victim, GroundCode]]:
    """The running jobs the waiting one may stop, each with its cost and the first ground
    the policy allows that lets it: a higher tier, funding, quota to reclaim, fair share.
    Never a job of a higher tier than the waiting one: it would only win its GPUs back."""
    if not could_claim(stoppable, waiting.tier, grounds):
        return []
    allowed, rank = grounds.allowed, TIER_RANK[waiting.tier]
    by_tier = TIER in allowed
    by_funding = FUNDED in allowed and grounds.funded
    reclaims = grounds.reclaims_from if RECLAIM in allowed else frozenset()
    by_share = FAIR_SHARE in allowed and grounds.under_share
    over_share, sliced = grounds.over_share, stoppable.sliced
    jobs = stoppable.jobs
    if only_fair_share(stoppable, rank, by_tier, by_funding, reclaims):
        # The one ground left stops only jobs past their time slice of accounts over their
        # share: the others need not be looked at one by one (most jobs, on a busy cluster).
        jobs = [job for job in jobs if job.job_id in sliced and job.spec.account in over_share]
    found: list[tuple[Victim, GroundCode]] = []
    for job in jobs:
        theirs = TIER_RANK[job.spec.tier]
        if job.job_id in exclude:
            continue
        reclaimed = bool(reclaims) and not reclaims.isdisjoint(ancestry(job.spec.account))
        if theirs < rank and not reclaimed:
            continue  # it would only win its GPUs back; quota lent is owed whatever the tier
        code: GroundCode
        if by_tier and rank < theirs:
            code = TIER
        elif by_funding and not job.funded:
            code = FUNDED
        elif reclaimed:
            code = RECLAIM
        elif by_share and job.job_id in sliced and job.spec.account in over_share:
            code = FAIR_SHARE
        else:
            continue
        found.append((as_victim(job, stoppable.now, stoppable.restart_overhead_ms), code))
    return found


def as_victim(job: JobRecord, now: int, restart_overhead_ms: int) -> Victim:
    """The running job as the victim search sees it: what stopping it now costs."""
    cost = cost_of(job, now, restart_overhead_ms)
    return Victim(job_id=job.job_id, placements=job.placements, cost=cost, order=victim_order(job))


def only_fair_share(
    stoppable: Stoppable, rank: int, by_tier: bool, by_funding: bool, reclaims: frozenset[str]
) -> bool:
    """Whether no ground but fair share could let a waiting job of tier ``rank`` stop any
    of the ``stoppable`` jobs: none is of a less urgent tier (or the policy stops none for
    it), none is unfunded (or it would not be funded), and it reclaims from no one."""
    return (
        not (by_tier and rank < stoppable.lowest_tier)
        and not (by_funding and stoppable.any_unfunded)
        and not reclaims
    )


def victim_order(job: JobRecord, borrowing: bool = False) -> tuple[int, ...]:
    """Among victims that lose equal work, which to stop first (smallest first): the least
    urgent tier, then capacity borrowed from the cohort, then the most recently started,
    then the most recently submitted. Never a name: renaming jobs changes no decision."""
    started = job.started_at if job.started_at is not None else 0
    return (-TIER_RANK[job.spec.tier], not borrowing, -started, -job.submitted_seq)


def could_claim(stoppable: Stoppable | None, tier: str, grounds: Grounds) -> bool:
    """Whether a waiting job of ``tier`` with ``grounds`` could stop some running job at
    all, judged from what ``stoppable`` sums up rather than job by job. Without
    ``stoppable`` (not listed yet) only reclaiming is judged: the other grounds need it."""
    allowed = grounds.allowed
    if RECLAIM in allowed and grounds.reclaims_from:
        return True
    return stoppable is not None and (
        (TIER in allowed and TIER_RANK[tier] < stoppable.lowest_tier)
        or (FUNDED in allowed and grounds.funded and stoppable.any_unfunded)
        or (
            FAIR_SHARE in allowed
            and grounds.under_share
            and bool(stoppable.sliceable & grounds.over_share)
        )
    )


def _slice_ends(job: JobRecord, slice_ns: int | None) -> int | None:
    """When fair share may stop the job: past its time slice, and never inside its
    minimum runtime; None if it never may (it cannot resume, or fair share stops nothing)."""
    if slice_ns is None or not job.spec.resumable or job.started_at is None:
        return None
    return job.started_at + max(slice_ns, job.spec.min_runtime_ns)


def _past_slice(job: JobRecord, now: int, slice_ns: int | None) -> bool:
    ends = _slice_ends(job, slice_ns)
    return ends is not None and now >= ends
