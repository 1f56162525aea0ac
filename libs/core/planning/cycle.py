"""One planning cycle's working state, and the few things every phase does with it: admit
a job, tell a job why it waits, keep the GPUs of a hold. The phases (``judge``,
``reserve``, ``fill``, ``preempt``, ``elastic``) are functions of a ``Cycle``."""

from collections.abc import Callable
from operator import attrgetter

import msgspec

from allot.core.budgets import fund, promised
from allot.core.fairshare import Standing
from allot.core.model import JobRecord, State
from allot.core.placement import Capacity
from allot.core.planning.memo import Holders, PlanMemo, Releases
from allot.core.planning.order import exhausted_accounts
from allot.core.planning.policy import Policy
from allot.core.preemption import TIER_RANK
from allot.core.quota import QuotaBook, QuotaFrame, Usage, needs
from allot.core.topology import model_of
from allot.proto.codes import LENT, PREEMPTING, RESERVED_FOR, ReasonCode
from allot.proto.events import (
    Admission,
    Hold,
    JobSpec,
    PendingReason,
    Placement,
    Preemption,
    ReasonParams,
    Topology,
)

# What placement sees of a job: (workers, GPUs per worker, topology). On the same free GPUs,
# jobs of one shape fit, or fail to fit, alike.
JobShape = tuple[int, int, Topology]
# What quota and placement see of a job: (account, then the shape's fields, flavor, CPUs
# and memory per worker). In one cycle, jobs of one demand are admitted, or refused for
# one reason, alike: quota room and free GPUs only shrink.
Demand = tuple[str, int, int, Topology, str | None, int, int]
# Cycles cache what they worked out by these keys: a job field that comes to change where
# a job fits, or what it is charged, is added to them here, and only here. Plain tuples,
# read off a spec in C: keys are made for every job a cycle looks at.
shape_of: Callable[[JobSpec], JobShape] = attrgetter("workers", "gpus", "topology")
demand_of: Callable[[JobSpec], Demand] = attrgetter(
    "account", "workers", "gpus", "topology", "flavor", "cpus", "memory_mib"
)


Refusal = tuple[ReasonCode, ReasonParams, ReasonParams]  # code, parameters, figures of the moment
# Which GPUs set aside a job may start on: the first reservation's, and the further
# reservations', by index, that it ends before or may be lent (``Cycle.may_use_set_aside``).
# Part of the keys refusals are kept by: a job that may use more sees more room.
SetAside = tuple[bool, tuple[int, ...]]
# A stop is worth it only for a run of this many restart overheads at least: GPUs set
# aside are lent only where the reservation starts that much later, and a job is moved
# (PACK) only once it has run that long. Less, and restarts would be much of what it runs.
WORTH_A_STOP = 10


class Waiting(msgspec.Struct, frozen=True, kw_only=True):
    """A job left waiting, as this cycle sees it: its reason and the figures of the moment
    (``detail``: free GPUs, the largest block, an estimated start...)."""

    reason: PendingReason
    position: int  # in the planner's order, from 1
    detail: ReasonParams = {}


class Reservation(msgspec.Struct, frozen=True, kw_only=True):
    job_id: str
    starts_at: int  # estimated from running jobs' declared max_runtime
    placements: list[Placement]  # what it will take then
    set_aside: list[Placement]  # of those, the GPUs free now, that backfill must leave alone


class Admitted(msgspec.Struct, kw_only=True):
    job: JobRecord
    placements: list[Placement]
    funded: bool
    lent: bool = False  # on GPUs set aside for the reservation, which it may outlast


class Cycle:
    """One cycle's working state: what is still free, quota use, the reservation, and the
    decisions so far."""

    def __init__(
        self,
        state: State,
        now: int,
        policy: Policy,
        ranked: dict[str, Standing],
        memo: PlanMemo | None = None,
    ):
        self.state, self.now, self.policy, self.ranked = state, now, policy, ranked
        self.memo = memo
        # Without a memo, what follows from the holders is still worked out once a cycle.
        self.holders = memo.holders() if memo is not None else Holders(state)
        self.capacity = memo.capacity() if memo is not None else Capacity.of(state)
        frame: QuotaFrame | None = None
        if memo is not None and policy.quotas:
            frame = memo.quota_frame()
        self.quotas = QuotaBook(state, frame) if policy.quotas else QuotaBook(State())
        # GPUs kept for jobs that preempted others, and the quota they will use: nobody
        # else takes either once its victims are gone.
        for job_id, placements in state.holds.items():
            self.keep(placements, take=True)
            self.hold_quota(state.jobs[job_id], placements, take=True)
        self.free_at_start = dict(self.capacity.free_by_model)
        self.exhausted = exhausted_accounts(state, now)
        # Budget promised by earlier plans and not charged yet, and to jobs funded this cycle.
        self.budget_reserved: dict[str, int] = promised(state, now)
        self.admitted: list[Admitted] = []
        self.waiting: list[Waiting] = []
        self.reservation: Reservation | None = None
        self.reservation_tries = 0
        # Reservations for the jobs short of room after the first one's (``reserve_further``),
        # and the (shape, models) that found none
        self.further: list[Reservation] = []
        self.further_unplaced: set[tuple[JobShape, tuple[str, ...]]] = set()
        self.reserved_at = 0  # the reservation's job's position in the queue
        # The releases as of how many admissions, and whether they depend on ``now``.
        self.releases: tuple[int, Releases] = (-1, [])
        self.releases_timed = False
        self.preemptions: list[Preemption] = []
        self.holds: list[Hold] = []  # new holds, and emptied ones that end
        self.stopping_for: dict[str, int] = {}  # waiting job -> jobs still stopping for it
        # The quota of the jobs being stopped for holds, those of earlier plans and those
        # this cycle picks: what is given back before the held jobs start.
        self.stopping: list[tuple[str, Usage]] = []
        self._quota_of: dict[str, tuple[str, Usage]] = {}  # running jobs do not change
        for job_id in state.holders if state.holds else ():  # jobs stop only for holds
            chosen = state.jobs[job_id].preemption
            if chosen is not None and "for" in chosen.params:
                waiting = str(chosen.params["for"])
                self.stopping_for[waiting] = self.stopping_for.get(waiting, 0) + 1
                if self.quotas.active:
                    self.stopping.append(self.quota_of(state.jobs[job_id]))
        # (shape, models, may use set-aside GPUs) -> why such a job does not fit. Within a
        # cycle free space only shrinks, so a shape that failed once fails again.
        self.unplaced: dict[tuple[JobShape, tuple[str, ...], SetAside], Refusal] = {}
        # (demand, may use set-aside GPUs) -> the refusal, and the quota version it was
        # made at (``judge.verdict``)
        self.refused: dict[tuple[Demand, SetAside], tuple[Refusal, int]] = {}
        # demand -> whether it borrows on every model (``borrows_anywhere``), and the quota
        # version that was worked out at
        self._borrowing: dict[Demand, tuple[bool, int]] = {}

    def admission(self, admitted: Admitted) -> Admission:
        return Admission(
            job_id=admitted.job.job_id,
            placements=admitted.placements,
            funded=admitted.funded,
            lent=True if admitted.lent else msgspec.UNSET,
        )

    def no_room(self) -> bool:
        """No GPU is left that a waiting job could take (backfill may use the GPUs set
        aside for the reservation). Without schedulable nodes, each job is told so."""
        set_aside = self.reservation is not None and self.reservation.set_aside
        return (
            bool(self.capacity.nodes)
            and not set_aside
            and not any(self.capacity.free_by_model.values())
            and not any(r.set_aside for r in self.further)
        )

    def borrows(self, job: JobRecord, placements: list[Placement]) -> bool:
        """Whether the job, placed there, would borrow quota. Work within its accounts'
        nominal quotas is admitted before work that would borrow, each in queue order (as
        Kueue does); use only grows within a cycle, so a job put back stays one that would
        borrow."""
        quotas = self.quotas
        if not quotas.active:
            return False
        model = self.capacity.nodes[placements[0].node_id].model
        return quotas.borrows(job.spec.account, needs(job.spec, model))

    def borrows_anywhere(self, job: JobRecord) -> bool:
        """Whether the job would borrow quota on every GPU model it may run on: then
        ``borrows`` holds for any placement found for it, and the fill need not look for one
        before putting it back. Kept by demand while nothing is charged (``borrows`` reads
        only the account's path, its use and the job's demand)."""
        quotas = self.quotas
        if not quotas.active:
            return False
        demand = demand_of(job.spec)
        known = self._borrowing.get(demand)
        if known is not None and known[1] == quotas.version:
            return known[0]
        models = self.models_of(job)
        account = job.spec.account
        anywhere = bool(models) and all(
            quotas.borrows(account, needs(job.spec, model)) for model in models
        )
        self._borrowing[demand] = (anywhere, quotas.version)
        return anywhere

    def models_of(self, job: JobRecord) -> list[str]:
        return self.models_of_spec(job.spec)

    def models_of_spec(self, spec: JobSpec) -> list[str]:
        return [spec.flavor] if spec.flavor else self.capacity.models

    def may_use_set_aside(self, job: JobRecord, ahead: bool = False) -> SetAside:
        """Which GPUs set aside the job may start on: a reservation's where it ends before
        that starts (backfill) or it may be lent them; the first reservation's also where it
        comes ``ahead`` of that reservation's job."""
        first = ahead or self.ends_before_reservation(job) or self.may_be_lent(job)
        if not self.further:
            return first, ()
        runtime = job.spec.max_runtime_ns
        ends = None if runtime is None else self.now + runtime
        return first, tuple(
            n
            for n, r in enumerate(self.further)
            if (ends is not None and ends <= r.starts_at) or self.may_be_lent(job, r)
        )

    def set_aside(self, usable: SetAside) -> list[tuple[str, list[int]]]:
        """The GPUs set aside that ``usable`` names, by node."""
        first, further = usable
        reservation = self.reservation
        lent = reservation.set_aside if first and reservation is not None else []
        for n in further:
            lent = [*lent, *self.further[n].set_aside]
        return [(p.node_id, p.gpus) for p in lent]

    def reservation_of(self, job_id: str) -> Reservation | None:
        """The job's reservation this cycle, the first or a further one."""
        if self.reservation is not None and self.reservation.job_id == job_id:
            return self.reservation
        return next((r for r in self.further if r.job_id == job_id), None)

    def ends_before_reservation(self, job: JobRecord) -> bool:
        """Whether the job's declared runtime ends before the reservation starts."""
        reservation = self.reservation
        if reservation is None:  # most cycles: asked of every job looked at
            return False
        runtime = job.spec.max_runtime_ns
        return runtime is not None and self.now + runtime <= reservation.starts_at

    def may_be_lent(self, job: JobRecord, reservation: Reservation | None = None) -> bool:
        """Whether the GPUs set aside for the reservation (the first one unless another is
        given) may be lent to the job until its job can start (ground LENT): it can resume,
        nothing could protect it from being stopped (no minimum runtime), it is of no more
        urgent tier than the reservation's job, and the reservation is far enough off to be
        worth a restart."""
        reservation = reservation or self.reservation
        spec = job.spec
        if (
            reservation is None
            or not self.lends(reservation)
            or not spec.resumable
            or spec.min_runtime_ns
        ):
            return False
        reserved_for = self.state.jobs[reservation.job_id].spec
        return TIER_RANK[spec.tier] >= TIER_RANK[reserved_for.tier]

    def lends(self, reservation: Reservation | None = None) -> bool:
        """Whether the GPUs set aside for the reservation (the first one unless another is
        given) may be lent to any job at all: the policy stops lent jobs, and the
        reservation is far enough off to be worth a restart."""
        reservation, policy = reservation or self.reservation, self.policy
        return (
            reservation is not None
            and policy.preemption
            and LENT in policy.grounds
            and reservation.starts_at - self.now >= policy.restart_overhead_ns * WORTH_A_STOP
        )

    def keep(self, placements: list[Placement], take: bool) -> None:
        """Keep (or hand back) the GPUs of a hold that are free: not allocated in the log."""
        for placement in placements:
            node = self.state.nodes.get(placement.node_id)
            if node is None or placement.node_id not in self.capacity.nodes:
                continue
            free = [g for g in placement.gpus if g not in node.allocated]
            (self.capacity.take if take else self.capacity.give)(placement.node_id, free)

    def quota_of(self, job: JobRecord) -> tuple[str, Usage]:
        """What a running job holds of its account's quota."""
        known = self._quota_of.get(job.job_id)
        if known is None:
            gpus = sum(len(g) for g in job.placements.values())
            node = self.state.nodes.get(next(iter(job.placements))) if job.placements else None
            usage = needs(job.spec, model_of(node) if node else None, gpus)
            known = self._quota_of[job.job_id] = (job.spec.account, usage)
        return known

    def hold_quota(self, job: JobRecord, placements: list[Placement], take: bool) -> None:
        """Count (or stop counting) the quota a held job will use once it starts there."""
        node = self.state.nodes.get(placements[0].node_id) if placements else None
        if node is not None and node.gpus:
            amounts = needs(job.spec, model_of(node))
            self.quotas.charge(
                job.spec.account, amounts if take else {r: -n for r, n in amounts.items()}
            )

    def admit(self, job: JobRecord, placements: list[Placement], ahead: bool = False) -> None:
        """``ahead``: a job that comes before the reservation's job in the queue (put back
        as it would borrow): the GPUs set aside it takes are its own, not lent."""
        ends_before_reservation = self.ends_before_reservation(job)
        lent = False
        for placement in placements:
            self.capacity.take(placement.node_id, placement.gpus)
        reservation = self.reservation
        if reservation is not None and reservation.set_aside:  # a backfill may take them
            taken = {(p.node_id, g) for p in placements for g in p.gpus}
            still = _left_set_aside(reservation.set_aside, taken)
            lent = (
                still != reservation.set_aside
                and not (ends_before_reservation or ahead)
                and self.may_be_lent(job)
            )
            if still != reservation.set_aside and not (ends_before_reservation or lent):
                # Not a backfill but a job ahead of the reserved one (put back as it would
                # borrow): it may hold them past the start, so the estimate no longer holds.
                # The rest set aside is free again, to be reserved for anew.
                for placement in still:
                    self.capacity.give(placement.node_id, placement.gpus)
                self.reservation, still = None, []
            if still != reservation.set_aside:
                if self.reservation is not None:
                    self.reservation = msgspec.structs.replace(reservation, set_aside=still)
                self._forget_reserved_for()
        if self.further:
            lent = self._take_further(job, placements) or lent
        model = self.capacity.nodes[placements[0].node_id].model
        self.quotas.charge(job.spec.account, needs(job.spec, model))
        funded = fund(self.state, job.spec, self.now, self.budget_reserved)
        self.admitted.append(Admitted(job=job, placements=placements, funded=funded, lent=lent))

    def _take_further(self, job: JobRecord, placements: list[Placement]) -> bool:
        """GPUs set aside for further reservations that an admitted job takes: only jobs
        that end before those start, or that may be lent them, are given them
        (``may_use_set_aside``). Whether it was lent any."""
        taken = {(p.node_id, g) for p in placements for g in p.gpus}
        runtime = job.spec.max_runtime_ns
        shrunk = lent = False
        for n, reservation in enumerate(self.further):
            still = _left_set_aside(reservation.set_aside, taken)
            if still != reservation.set_aside:
                self.further[n] = msgspec.structs.replace(reservation, set_aside=still)
                shrunk = True
                lent = lent or runtime is None or self.now + runtime > reservation.starts_at
        if shrunk:
            self._forget_reserved_for()
        return lent

    def _forget_reserved_for(self) -> None:
        """Less is set aside: a job told it waits for a reservation may now wait behind
        others instead. Every other refusal stands."""
        self.unplaced = {k: v for k, v in self.unplaced.items() if v[0] != RESERVED_FOR}
        self.refused = {k: v for k, v in self.refused.items() if v[0][0] != RESERVED_FOR}

    def stop_for(
        self,
        job: JobRecord,
        position: int,
        n: int | None,
        stopped: list[Preemption],
        placements: list[Placement],
    ) -> None:
        """Record the jobs ``stopped`` for ``job``, hold the GPUs it will take there, and
        tell it so (``n``: its index in ``waiting``; None for a job the cycle did not look
        at)."""
        self.preemptions += stopped
        self.holds.append(Hold(job_id=job.job_id, placements=placements))
        self.keep(placements, take=True)
        self.hold_quota(job, placements, take=True)
        reason = PendingReason(job_id=job.job_id, code=PREEMPTING)
        stopping = Waiting(reason=reason, position=position, detail={"stopping": len(stopped)})
        if n is None:
            self.waiting.append(stopping)
        else:
            self.waiting[n] = stopping

    def in_queue_order(self) -> list[int]:
        """The indices of ``waiting`` in queue order (jobs put back were told later)."""
        return sorted(range(len(self.waiting)), key=lambda n: self.waiting[n].position)

    def wait(
        self,
        job: JobRecord,
        position: int,
        code: ReasonCode,
        params: ReasonParams,
        detail: ReasonParams | None = None,
    ) -> None:
        reason = PendingReason(job_id=job.job_id, code=code, params=params)
        self.waiting.append(Waiting(reason=reason, position=position, detail=detail or {}))


def _left_set_aside(set_aside: list[Placement], taken: set[tuple[str, int]]) -> list[Placement]:
    """What stays set aside once the (node, GPU) pairs ``taken`` are taken."""
    return [
        Placement(node_id=p.node_id, gpus=gpus)
        for p in set_aside
        if (gpus := [g for g in p.gpus if (p.node_id, g) not in taken])
    ]
