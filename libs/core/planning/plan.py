"""The driver: ``plan(state, now, policy) -> Plan``, one cycle over a snapshot, phase by
phase (this package's ``__init__`` tells them)."""

import heapq
import itertools
from collections.abc import Iterator

import msgspec

from allot.core.fairshare import Standing, account_rank, standings
from allot.core.model import JobRecord, State
from allot.core.planning.cycle import Cycle, Reservation, Waiting
from allot.core.planning.elastic import grow_elastic
from allot.core.planning.fill import fill
from allot.core.planning.judge import behind, consider
from allot.core.planning.memo import PlanMemo
from allot.core.planning.order import ordered
from allot.core.planning.policy import Policy, uses_fair_share
from allot.core.planning.preempt import preempt
from allot.proto.codes import QUEUED
from allot.proto.events import (
    AccountRank,
    Admission,
    Hold,
    Meta,
    PendingReason,
    PlanComputed,
    Preemption,
)

# A plan tells at most this many jobs QUEUED, the longest waiting first, and the next plans
# the rest: after a burst of submissions, one plan telling each would outgrow the log's
# largest event, and no plan could be stored at all.
MAX_QUEUED = 1000


class Plan(msgspec.Struct, frozen=True, kw_only=True):
    admissions: list[Admission]
    pending: list[PendingReason]  # new or changed reasons only
    # Of the accounts of the jobs the plan names, where the policy uses fair share; not a
    # change by itself.
    ranks: list[AccountRank] = []
    preemptions: list[Preemption] = []
    holds: list[Hold] = []  # GPUs kept for jobs that preempted others; empty: let go
    waiting: list[Waiting] = []  # every job looked at and left waiting, in order; not recorded
    reservation: Reservation | None = None  # not recorded
    further: list[Reservation] = []  # reservations past the first; not recorded

    @property
    def empty(self) -> bool:
        """Nothing to record: appending it would only answer every event with a plan."""
        return not (self.admissions or self.pending or self.preemptions or self.holds)

    def recorded(
        self,
        meta: Meta,
        *,
        basis_seq: int,
        now: int,
        policy: str,
        policy_hash: str,
        code_version: str,
    ) -> PlanComputed:
        """The plan as the log records it: its decisions, and what they were computed from
        (``waiting`` and the reservations are not recorded)."""
        return PlanComputed(
            meta=meta,
            basis_seq=basis_seq,
            now=now,
            policy=policy,
            policy_hash=policy_hash,
            code_version=code_version,
            admissions=self.admissions,
            pending=self.pending,
            ranks=self.ranks,
            preemptions=self.preemptions,
            holds=self.holds,
        )


def plan(
    state: State,
    now: int,
    policy: Policy,
    memo: PlanMemo | None = None,
    whole_queue: bool = False,
) -> Plan:
    """Decide which pending jobs start where. ``now`` is recorded, not read. A ``memo`` of
    this ``state`` saves recomputing fair share and quota structure between plans; it never
    changes the plan.

    A cycle looks at the queue in order up to the policy's ``queue_depth``, and stops early
    once nothing more could start (no GPU is left free); the jobs it does not reach keep the
    reason last stated, or are told QUEUED if none was (docs/adr/0010). ``whole_queue``
    looks at every job, for showing each one's reason: what ``allot queue`` and ``allot
    explain`` do."""
    if memo is not None and memo.state is not state:
        raise ValueError("a PlanMemo serves the one State it was made for")
    ranked: dict[str, Standing] = {}
    if uses_fair_share(policy):
        ranked = (
            memo.standings.standings(now, policy.fair_share)
            if memo is not None
            else standings(state, now, policy.fair_share)
        )
    cycle = Cycle(state, now, policy, ranked, memo)
    depth = len(state.pending) if whole_queue else policy.queue_depth
    # 1. Order the waiting jobs; 2. judge each in turn, up to the depth (3. reserving for
    # the first short of room, and as many more as the policy asks).
    queued = enumerate(ordered(state, ranked, now, policy), 1)
    unreached, blocked = _judge_in_order(cycle, queued, depth, whole_queue)
    # 4. Fill what is left, past the depth.
    if policy.fill_depth and not (blocked or whole_queue):
        unreached, not_reached = itertools.tee(unreached)
        fill(cycle, policy.fill_depth, not_reached)
    # 5. Preempt for the jobs owed room.
    if policy.preemption:
        preempt(cycle, unreached, depth)
    # 6. Grow the elastic jobs admitted.
    grow_elastic(cycle)
    return _decided(cycle, whole_queue)


def _judge_in_order(
    cycle: Cycle, queued: Iterator[tuple[int, JobRecord]], depth: int, whole_queue: bool
) -> tuple[Iterator[tuple[int, JobRecord]], bool]:
    """Phases 2 and 3 over the queue, until the depth or until nothing more could start;
    but on past either for a job others are being stopped for, which may start on its
    GPUs. The jobs not reached, in order; and whether strict order stopped the queue."""
    state, strict = cycle.state, cycle.policy.strict
    unseen_holds = len(state.holds)
    blocked = False
    borrowing: list[tuple[int, JobRecord]] = []  # put back by ``consider``
    passed: list[tuple[int, JobRecord]] = []  # not reached, on the way to a held job
    for position, job in queued:
        held = job.job_id in state.holds
        unseen_holds -= held
        beyond = position > depth or blocked or cycle.no_room()
        if beyond and not (whole_queue or held):
            if unseen_holds:
                passed.append((position, job))
                continue  # a job others are stopped for may still start on its GPUs
            unreached = itertools.chain(passed, [(position, job)], queued)
            if cycle.no_room():
                # Nothing can start: the work that would borrow is left unreached with the
                # rest, in queue order, rather than told why before work within its quota.
                return heapq.merge(borrowing, unreached, key=_position), blocked
            _consider_all(cycle, borrowing)
            return unreached, blocked
        if blocked:  # strict order: nothing passes the first job that waits
            behind(cycle, job, position)
            continue
        admitted = len(cycle.admitted)
        consider(cycle, job, position, None if strict else borrowing)
        blocked = strict and len(cycle.admitted) == admitted
    _consider_all(cycle, borrowing)
    return iter(passed), blocked


def _position(queued: tuple[int, JobRecord]) -> int:
    return queued[0]


def _consider_all(cycle: Cycle, jobs: list[tuple[int, JobRecord]]) -> None:
    """The jobs that would borrow, after the rest: they start where room is left."""
    for position, job in jobs:
        consider(cycle, job, position, put_back=True)


def _decided(cycle: Cycle, whole_queue: bool) -> Plan:
    """The cycle's decisions as a plan: reasons stated only where they changed, QUEUED for
    the jobs never looked at, ranks of the accounts the plan names."""
    state, ranked, memo = cycle.state, cycle.ranked, cycle.memo
    waiting = sorted(cycle.waiting, key=lambda w: w.position)  # some were looked at later
    stated = [w.reason for w in waiting if state.jobs[w.reason.job_id].reason != w.reason]
    looked_at = {w.reason.job_id for w in waiting} | {a.job.job_id for a in cycle.admitted}
    untold = (PendingReason(job_id=j, code=QUEUED) for j in state.unstated if j not in looked_at)
    admissions = [cycle.admission(a) for a in cycle.admitted]
    pending = stated + list(untold if whole_queue else itertools.islice(untold, MAX_QUEUED))
    named = [item.job_id for items in (admissions, pending, cycle.preemptions) for item in items]
    rank_of = memo.standings.account_rank if memo is not None else lambda a: account_rank(ranked[a])
    return Plan(
        admissions=admissions,
        pending=pending,
        ranks=[rank_of(a) for a in _accounts_of(state, named) if a in ranked],
        waiting=waiting,
        reservation=cycle.reservation,
        further=cycle.further,
        preemptions=cycle.preemptions,
        holds=cycle.holds,
    )


def _accounts_of(state: State, job_ids: list[str]) -> list[str]:
    """The accounts a plan states ranks for: those of the jobs it names. Not every waiting
    account: with thousands of them, their ranks alone would make the plan larger than the
    log's largest event."""
    return sorted({state.jobs[job_id].spec.account for job_id in job_ids})
