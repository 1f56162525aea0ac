"""Admission decisions: ``plan(state, now, policy) -> Plan``, one cycle over a snapshot.

1. Snapshot: the free GPUs of schedulable nodes (``Capacity``) and quota use (``QuotaBook``).
2. Order the pending jobs by tier (interactive, batch, best-effort); then jobs whose budget
   is exhausted after the rest (they run on idle capacity only, R8); then by the account's
   fair-share rank (``allot.core.fairshare``) lifted one rank per aging step waited, up to
   a bound (R11); then by submission; then by job id.
3. Quota: the job must fit its nominal quota, borrowing and lending limits (``quota``).
4. Placement: whole gangs only, topology respected, best fit (``placement``).
5. The highest-ranked job that does not fit gets a reservation: the GPUs it will take at
   the earliest time running jobs' declared ``max_runtime`` free enough of them.
6. Backfill: later jobs start only where they cannot delay that reservation: off its GPUs,
   or on them only when their own ``max_runtime`` ends before it starts (R5).
   6b. Fill: past the depth (below), GPUs that are still free go to the jobs that need no
   more than are left, in queue order (``fill_depth`` of them at most), on the same terms.
7. Elastic jobs admitted in this cycle grow toward ``max_gpus`` with what is left (R6).

Every job the cycle looks at and leaves waiting gets a stable reason code with parameters
that describe the job, not the moment; a plan records only the reasons that changed since
the log last stated them, so plans stay small however long the queue is. A cycle looks at
``queue_depth`` jobs at most and stops once no GPU is free; a job it has never looked at
is told QUEUED (docs/adr/0010). Figures of the moment (free GPUs,
position, estimated start) come with each waiting job in ``Plan.waiting`` for ``allot
queue`` and ``allot explain``, and are recomputable from any plan's basis.

8. Preemption: a waiting job short of room that is owed GPUs (a higher tier, funding,
   quota it lent, fair share) picks the cheapest running jobs to stop; the GPUs it will take
   are held for it until it starts. Jobs on draining nodes are stopped as their protection
   ends, those that cannot resume only by a drain ``--now`` (``allot.core.drain``).
"""

import bisect
import hashlib
import heapq
import itertools
from collections.abc import Callable, Iterable, Iterator
from typing import Literal

import msgspec

from allot.core.accounts import ancestry
from allot.core.budgets import fund
from allot.core.drain import draining
from allot.core.fairshare import (
    FairSharePolicy,
    Standing,
    StandingsMemo,
    account_rank,
    standings,
)
from allot.core.model import HOUR_NS, FeedReader, JobRecord, JobStatus, State
from allot.core.placement import Capacity, Schedulable, schedulable
from allot.core.preemption import (
    DRAIN,
    FAIR_SHARE,
    FUNDED,
    RECLAIM,
    TIER,
    Grounds,
    Stoppable,
    StoppableMemo,
    Victim,
    candidates,
    choose,
    could_claim,
    stoppable_jobs,
)
from allot.core.quota import QuotaBlock, QuotaBook, QuotaFrame, gpu_amounts, needs
from allot.core.topology import model_of
from allot.proto.events import (
    TIERS,
    AccountRank,
    Admission,
    Hold,
    JobSpec,
    Meta,
    PendingReason,
    Placement,
    PlanComputed,
    Preemption,
    ReasonParams,
)

# Reason codes: stable strings, part of the log's contract.
NO_NODES = "NO_NODES"  # no schedulable node (of the job's flavor)
NODE_CORDONED = "NODE_CORDONED"  # its flavor exists only on cordoned or unhealthy nodes
QUOTA = "QUOTA"  # a quota or borrowing limit on its path is reached
BUDGET_EXHAUSTED = "BUDGET_EXHAUSTED"  # its account's budget is used up: idle capacity only
RESERVED_FOR = "RESERVED_FOR"  # it would fit, but only on GPUs held for a higher-ranked job
NO_BLOCK = "NO_BLOCK"  # enough GPUs are free, but not in one block of its topology
BEHIND = "BEHIND"  # the GPUs it would fit were taken by higher-ranked jobs in this cycle
NO_FIT = "NO_FIT"  # fewer GPUs are free than it needs
PREEMPTING = "PREEMPTING"  # jobs are being stopped for it; their GPUs are kept for it
# Not looked at yet: a cycle stops at the policy's queue depth, or once no GPU is left.
QUEUED = "QUEUED"
# A plan tells at most this many jobs QUEUED, the longest waiting first, and the next plans
# the rest: after a burst of submissions, one plan telling each would outgrow the log's
# largest event, and no plan could be stored at all.
MAX_QUEUED = 1000


class Policy(msgspec.Struct, frozen=True, kw_only=True):
    """The knobs of a planning policy; its content hash is recorded with every plan."""

    name: str = "allot"
    fair_share: FairSharePolicy = FairSharePolicy()
    aging_step_ns: int = HOUR_NS  # each step waited lifts a job one rank...
    # ...up to this many: a few, so that waiting cannot outweigh fair share. With a bound
    # as large as the number of accounts, every job that waited a day would pass the work
    # of the least-served account that arrived since (on Philly, its worst-served account
    # got 1% of what it was owed with 24; 76% with 4).
    aging_max_ranks: int = 4
    backfill: bool = True  # reserve for the highest-ranked job that waits (steps 5 and 6)
    preemption: bool = True  # stop running jobs for waiting ones that are owed (step 8)
    preemptors_per_cycle: int = 4  # waiting jobs that may pick victims in one cycle
    restart_overhead_ns: int = 60 * 10**9  # what a restart costs, per GPU, on top of lost work
    time_slice_ns: int | None = 4 * HOUR_NS  # fair share may stop a resumable job after this
    # How the queue is ordered (step 2): "fair-share" as above; "fifo": by submission only;
    # "tier": by tier, then submission; "multifactor": Slurm's age and fair-share factors.
    order: Literal["fair-share", "fifo", "tier", "multifactor"] = "fair-share"
    strict: bool = False  # stop at the first job that does not fit (no job passes another)
    quotas: bool = True  # honour the accounts' quotas (step 3)
    grounds: tuple[str, ...] = (TIER, FUNDED, RECLAIM, FAIR_SHARE, DRAIN)  # to preempt on
    max_age_ns: int = 7 * 24 * HOUR_NS  # multifactor: the age at which the age factor is full
    # Jobs a cycle looks at, at most (Slurm's default_queue_depth is 100: filling past the
    # depth finds the small jobs a deeper look was for, so half that does as well)...
    queue_depth: int = 50
    # ...and past it, jobs that need no more GPUs than are left, looked at to fill them
    # (step 6b; 0: none).
    fill_depth: int = 100


DEFAULT_POLICY = Policy()


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
    held: list[Placement]  # of those, the GPUs free now that backfill must leave alone


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
        (``waiting`` and ``reservation`` are not recorded)."""
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


def policy_hash(policy: Policy) -> str:
    return hashlib.sha256(msgspec.json.encode(policy)).hexdigest()[:16]


class PlanMemo:
    """What a planner keeps between cycles because it changes less often than the state:
    fair-share standings, the quota frame, when running jobs end, and reservations. A plan
    is the same with or without it."""

    def __init__(self) -> None:
        self.standings = StandingsMemo()
        self.stoppable = StoppableMemo()
        self._frame: tuple[tuple[int, int, int], QuotaFrame] | None = None
        self._nodes: tuple[tuple[int, int], list[Schedulable], dict[str, Schedulable]] | None = None
        self._holders: tuple[tuple[int, int, int], _Holders] | None = None
        self._ends = _KeptEnds()
        self._free: Capacity | None = None
        self._free_reader = FeedReader()  # of ``State.holder_changes``
        self._held_on: dict[str, list[str]] = {}  # holder -> its nodes, as last read

    def quota_frame(self, state: State) -> QuotaFrame:
        key = (id(state), state.fair_share_version, state.nodes_version)
        if self._frame is None or self._frame[0] != key:
            self._frame = (key, QuotaFrame(state))
        return self._frame[1]

    def _schedulable(
        self, state: State
    ) -> tuple[tuple[int, int], list[Schedulable], dict[str, Schedulable]]:
        """The schedulable nodes in id order, and by id."""
        key = (id(state), state.nodes_version)
        if self._nodes is None or self._nodes[0] != key:
            nodes = schedulable(state)
            self._nodes = (key, nodes, {node[0]: node for node in nodes})
        return self._nodes

    def capacity(self, state: State) -> Capacity:
        """The free GPUs of the schedulable nodes, for a cycle to change: kept up to date
        node by node, reading again only the nodes of the holders the log changed since;
        every node after a node event."""
        changed = self._free_reader.changed(state.holder_changes, state.nodes_version)
        _, nodes, by_id = self._schedulable(state)
        if changed is None or self._free is None:
            self._free = Capacity.of(state, nodes)
            self._held_on = {
                job_id: list(state.jobs[job_id].placements) for job_id in state.holding
            }
            return self._free.copy()
        touched: set[str] = set()
        for job_id in changed:
            touched.update(self._held_on.pop(job_id, ()))
            if job_id in state.holding:
                held_on = self._held_on[job_id] = list(state.jobs[job_id].placements)
                touched.update(held_on)
        for node_id in touched:
            if node_id in by_id:  # else not schedulable: not in the capacity
                self._free.refresh(*by_id[node_id])
        return self._free.copy()

    def holders(self, state: State) -> "_Holders":
        """What follows from the jobs holding GPUs, kept while they stay as they are."""
        key = (id(state), state.holding_version, state.nodes_version)
        if self._holders is None or self._holders[0] != key:
            kept = self._ends  # not ``self``: the memo would hold itself, and stay till collected
            self._holders = (key, _Holders(state, lambda: kept.of(state)))
        return self._holders[1]


def plan(
    state: State,
    now: int,
    policy: Policy,
    memo: PlanMemo | None = None,
    whole_queue: bool = False,
) -> Plan:
    """Decide which pending jobs start where. ``now`` is recorded, not read. A ``memo``
    saves recomputing fair share and quota structure between plans; it never changes
    the plan.

    A cycle looks at the queue in order up to the policy's ``queue_depth``, and stops
    early once nothing more could start (no GPU is left free); the jobs it does not reach
    keep the reason last stated, or are told QUEUED if none was (docs/adr/0010).
    ``whole_queue`` looks at every job, for showing each one's reason: what ``allot
    queue`` and ``allot explain`` do."""
    ranked: dict[str, Standing] = {}
    if _uses_fair_share(policy) and memo is not None:
        ranked = memo.standings.standings(state, now, policy.fair_share)
    elif _uses_fair_share(policy):
        ranked = standings(state, now, policy.fair_share)
    rank_of = memo.standings.account_rank if memo is not None else lambda a: account_rank(ranked[a])
    frame = memo.quota_frame(state) if memo is not None and policy.quotas else None
    cycle = _Cycle(state, now, policy, ranked, frame, memo)
    queued: Iterator[tuple[int, JobRecord]] = enumerate(_ordered(state, ranked, now, policy), 1)
    depth = len(state.pending) if whole_queue else policy.queue_depth
    unseen_holds = len(state.holds)
    blocked = False
    for position, job in queued:
        held = job.job_id in state.holds
        unseen_holds -= held
        beyond = position > depth or blocked or cycle.no_room()
        if beyond and not (whole_queue or held):
            if unseen_holds:
                continue  # a job others are stopped for may still start on its GPUs
            queued = itertools.chain([(position, job)], queued)
            break
        if blocked:  # strict order: nothing passes the first job that waits
            cycle.behind(job, position)
            continue
        admitted = len(cycle.admitted)
        cycle.consider(job, position)
        blocked = policy.strict and len(cycle.admitted) == admitted
    if policy.fill_depth and not (blocked or whole_queue):
        cycle.fill(policy.fill_depth)
    if policy.preemption:
        cycle.preempt(queued, depth)
    cycle.grow_elastic()
    stated = [w.reason for w in cycle.waiting if state.jobs[w.reason.job_id].reason != w.reason]
    looked_at = {w.reason.job_id for w in cycle.waiting} | {a.job.job_id for a in cycle.admitted}
    untold = (PendingReason(job_id=j, code=QUEUED) for j in state.unstated if j not in looked_at)
    admissions = [cycle.admission(a) for a in cycle.admitted]
    pending = stated + list(untold if whole_queue else itertools.islice(untold, MAX_QUEUED))
    named = [item.job_id for items in (admissions, pending, cycle.preemptions) for item in items]
    return Plan(
        admissions=admissions,
        pending=pending,
        ranks=[rank_of(a) for a in _accounts_of(state, named) if a in ranked],
        waiting=cycle.waiting,
        reservation=cycle.reservation,
        preemptions=cycle.preemptions,
        holds=cycle.holds,
    )


def _uses_fair_share(policy: Policy) -> bool:
    """Whether the policy orders or preempts by fair share; if not, its plans state no
    ranks and computing them would only cost time."""
    return policy.order in ("fair-share", "multifactor") or (
        policy.preemption and FAIR_SHARE in policy.grounds
    )


def queue(state: State, now: int, policy: Policy) -> list[JobRecord]:
    """The pending jobs in the order the planner considers them at ``now``."""
    return list(_ordered(state, standings(state, now, policy.fair_share), now, policy))


def _accounts_of(state: State, job_ids: list[str]) -> list[str]:
    """The accounts a plan states ranks for: those of the jobs it names. Not every waiting
    account: with thousands of them, their ranks alone would make the plan larger than the
    log's largest event."""
    return sorted({state.jobs[job_id].spec.account for job_id in job_ids})


def _ordered(
    state: State, ranked: dict[str, Standing], now: int, policy: Policy, fits: int | None = None
) -> Iterator[JobRecord]:
    """The pending jobs in the planner's order, produced lazily: every ordering keeps the
    jobs of one tier and account in submission order, so merging those queues by the key of
    their next job gives the whole order without sorting it, and a cycle that stops early
    pays only for what it looked at. ``fits``: only the jobs that need no more GPUs than
    that (merging the queues split by size)."""
    base, (cap, times, per) = _order_key(state, ranked, now, policy)
    groups = (
        list(state.queues.items())
        if fits is None
        else [group for gpus, queues in state.sized_queues.items() if gpus <= fits
              for group in queues.items()]
    )  # fmt: skip
    jobs, queues = state.jobs, [entries for _, entries in groups]
    bases = [base(tier, account) for (tier, account), _ in groups]

    def key(n: int, job: JobRecord) -> int:
        waited = now - job.submitted_at
        lift = (cap if waited > cap else waited if waited > 0 else 0) * times // per
        return bases[n] - (lift << _SEQ_BITS) + job.submitted_seq

    # (key, queue, index in it, the job): keys are unique, so the job is never compared.
    heads = []
    for n, entries in enumerate(queues):
        job = jobs[entries[0][1]]
        heads.append((key(n, job), n, 0, job))
    heapq.heapify(heads)
    replace, pop = heapq.heapreplace, heapq.heappop
    full_lift, long_ago = cap * times // per, now - cap
    while heads:
        _, n, at, job = heads[0]
        # The queue at the top keeps it while its jobs come before the other queues' next,
        # the smaller of the top's children in the heap: without touching the heap.
        rest = len(heads)
        after = heads[1][0] if rest == 2 else min(heads[1][0], heads[2][0]) if rest > 2 else None
        entries, shared = queues[n], bases[n]
        lifted = shared - (full_lift << _SEQ_BITS)  # of a job that waited the most that counts
        yield job
        for i in range(at + 1, len(entries)):
            job = jobs[entries[i][1]]
            # ``key``, inlined: this runs for every job, most of which waited long enough for
            # the full lift
            if job.submitted_at <= long_ago:
                next_key = lifted + job.submitted_seq
            else:
                waited = now - job.submitted_at
                lift = (waited if waited > 0 else 0) * times // per
                next_key = shared - (lift << _SEQ_BITS) + job.submitted_seq
            if after is not None and next_key > after:
                replace(heads, (next_key, n, i, job))
                break
            yield job
        else:
            pop(heads)


# A job's key packs its order into one integer (the merge compares keys a hundred times a
# cycle): the part its queue shares, less what waiting has earned it (its lift), then its
# submission sequence (unique, below 2**64, a log sequence number) in the low bits.
_SEQ_BITS = 64
_FULL = 1_000_000  # a full multifactor factor
# A job's lift: min(its wait, cap) * times // per.
_Lift = tuple[int, int, int]


def _order_key(
    state: State, ranked: dict[str, Standing], now: int, policy: Policy
) -> tuple[Callable[[str, str], int], _Lift]:
    """The key of a job as (the part of its (tier, account) queue, how it lifts a job)."""
    outside_the_tree = len(ranked) + 1
    exhausted = _exhausted_accounts(state, now)
    tier: dict[str, int] = {name: n for n, name in enumerate(TIERS)}
    step, most = policy.aging_step_ns, policy.aging_max_ranks
    accounts = max(1, len(ranked))

    def rank(account: str) -> int:
        return ranked[account].rank if account in ranked else outside_the_tree

    if policy.order == "fair-share":
        # By tier, then budget exhausted, then fair-share rank lifted one per aging step
        # waited, up to ``most`` (rank - lift + most is in [0, ranks + most]).
        ranks = outside_the_tree + most + 1

        def fair_share(tier_name: str, account: str) -> int:
            group = tier[tier_name] * 2 + (account in exhausted)
            return (group * ranks + rank(account) + most) << _SEQ_BITS

        return fair_share, (most * step, 1, step)
    if policy.order == "multifactor":
        # Slurm's priority/multifactor with equal weights for age and fair share (Fair
        # Tree's factor is the account's rank from the top, as a fraction); highest first.
        # The age factor is the lift: full at ``max_age_ns``.
        def share(_: str, account: str) -> int:
            factor = (accounts - min(rank(account), accounts) + 1) * _FULL // accounts
            return (2 * _FULL - factor) << _SEQ_BITS

        return share, (policy.max_age_ns, _FULL, policy.max_age_ns)
    no_lift = (0, 0, 1)
    if policy.order == "tier":
        return (lambda tier_name, _: tier[tier_name] << _SEQ_BITS), no_lift
    return (lambda _, __: 0), no_lift


def _exhausted_accounts(state: State, now: int) -> dict[str, str]:
    """Accounts with jobs whose path holds a used-up budget -> that budget's account."""
    out: dict[str, str] = {}
    if not state.budgets:
        return out
    for account in state.job_accounts:
        for path in ancestry(account):
            budget = state.budgets.get(path)
            if budget is not None and budget.left(now) <= 0:
                out[account] = path
                break
    return out


RESERVATION_TRIES = 3  # each copies the free GPUs once: a few milliseconds on 1,000 nodes

_Refusal = tuple[str, ReasonParams, ReasonParams]  # code, parameters, figures of the moment
_ROOM_CODES = (NO_FIT, NO_BLOCK, BEHIND, RESERVED_FOR)


def _quota_refusal(block: QuotaBlock) -> _Refusal:
    params: ReasonParams = {
        "account": block.account,
        "resource": block.resource,
        "need": block.need,
    }
    return QUOTA, params, {"available": block.available}


_Reserved = tuple[int, list[Placement]] | None  # when it starts and where; None: no estimate


class _KeptEnds:
    """When the holders end, caught up with the holders the log changed since it was last
    asked; all of them again when a node changed (a lost node changes holders without
    naming them)."""

    def __init__(self) -> None:
        self._ends = _Ends()
        self._reader = FeedReader()  # of ``State.holder_changes``

    def of(self, state: State) -> "_Ends":
        changed = self._reader.changed(state.holder_changes, state.nodes_version)
        if changed is None:
            self._ends, changed = _Ends(), list(state.holding)
        return self._ends.update(state, changed)


class _Holders:
    """What a cycle works out from the jobs holding GPUs and may reuse while they stay as
    they are: when they end (worked out once asked), and the reservations made."""

    def __init__(self, state: State, ends: Callable[[], "_Ends"] | None = None):
        self._state = state
        self._ask_ends = ends or (lambda: _Ends().update(state, state.holding))
        self._ends: _Ends | None = None
        self.reservations: dict[tuple[object, ...], _Reserved] = {}  # see _reservation_key

    @property
    def ends(self) -> "_Ends":
        if self._ends is None:
            self._ends = self._ask_ends()
        return self._ends


class _Ends:
    """When the jobs holding GPUs end by their declared runtimes: ``listed`` as (the end, or
    None for a job admitted but not started, its runtime, job id, its GPUs by node), and
    ``released`` as a cycle uses them when none has ended in the past (soonest first, ties
    by job id). Kept up to date job by job (``update``), not worked out again."""

    def __init__(self) -> None:
        # Job id -> its end (None: not started), runtime and GPUs by node.
        self._entries: dict[str, tuple[int | None, int, dict[str, list[int]]]] = {}
        self.order: list[tuple[int, str]] = []  # (end, job id) of the started: released's order
        self.released: list[tuple[int, dict[str, list[int]]]] = []
        self._unstarted = 0

    def update(self, state: State, job_ids: Iterable[str]) -> "_Ends":
        """Take in what ``job_ids`` hold now, if they still hold GPUs."""
        for job_id in job_ids:
            known = self._entries.pop(job_id, None)
            if known is not None and known[0] is None:
                self._unstarted -= 1
            elif known is not None:
                at = bisect.bisect_left(self.order, (known[0], job_id))
                del self.order[at], self.released[at]
            job = state.jobs.get(job_id)
            runtime = None if job is None else job.spec.max_runtime_ns
            if job is None or runtime is None or job_id not in state.holding:
                continue
            started = job.started_at if job.status == JobStatus.RUNNING else None
            end = None if started is None else started + runtime
            self._entries[job_id] = (end, runtime, job.placements)
            if end is None:
                self._unstarted += 1
            else:
                at = bisect.bisect_left(self.order, (end, job_id))
                self.order.insert(at, (end, job_id))
                self.released.insert(at, (end, job.placements))
        return self

    @property
    def listed(self) -> list[tuple[int | None, int, str, dict[str, list[int]]]]:
        return [(end, runtime, job_id, placed) for job_id, (end, runtime, placed)
                in self._entries.items()]  # fmt: skip

    def timeless(self, now: int) -> bool:
        """Whether ``released`` holds at ``now``: every end known and none before it."""
        return not self._unstarted and (not self.order or self.order[0][0] >= now)


class _Admitted(msgspec.Struct, kw_only=True):
    job: JobRecord
    placements: list[Placement]
    funded: bool


class _Cycle:
    """One planning cycle's working state: what is still free, quota use, the reservation,
    and the decisions so far."""

    def __init__(
        self,
        state: State,
        now: int,
        policy: Policy,
        ranked: dict[str, Standing],
        frame: QuotaFrame | None = None,
        memo: PlanMemo | None = None,
    ):
        self.state, self.now, self.policy, self.ranked = state, now, policy, ranked
        self.memo = memo
        # Without a memo, what follows from the holders is still worked out once a cycle.
        self._holders = memo.holders(state) if memo is not None else _Holders(state)
        self.capacity = memo.capacity(state) if memo is not None else Capacity.of(state)
        # GPUs kept for jobs that preempted others: nobody else takes them once free.
        for placements in state.holds.values():
            self._hold(placements, take=True)
        self.free_at_start = dict(self.capacity.free_by_model)
        self.quotas = QuotaBook(state, frame) if policy.quotas else QuotaBook(State())
        self.exhausted = _exhausted_accounts(state, now)
        self.budget_reserved: dict[str, int] = {}  # budget promised to jobs funded this cycle
        self.admitted: list[_Admitted] = []
        self.waiting: list[Waiting] = []
        self.reservation: Reservation | None = None
        self.reservation_tries = 0
        self._released: tuple[int, list[tuple[int, dict[str, list[int]]]]] = (-1, [])
        self._released_timed = False  # whether the releases depend on the time of the cycle
        self.preemptions: list[Preemption] = []
        self.holds: list[Hold] = []  # new holds, and emptied ones that end
        self.stopping_for: dict[str, int] = {}  # waiting job -> jobs still stopping for it
        for job_id in state.holding if state.holds else ():  # jobs stop only for holds
            chosen = state.jobs[job_id].preemption
            if chosen is not None and "for" in chosen.params:
                waiting = str(chosen.params["for"])
                self.stopping_for[waiting] = self.stopping_for.get(waiting, 0) + 1
        # (shape, may use held GPUs) -> why such a job does not fit. Within a cycle free
        # space only shrinks, so a shape that failed once fails again.
        self._failed: dict[tuple[object, ...], _Refusal] = {}
        # (account, shape) -> the refusal, and the quota version it was made at; see consider
        self._refused: dict[tuple[object, ...], tuple[_Refusal, int]] = {}

    def admission(self, admitted: _Admitted) -> Admission:
        return Admission(
            job_id=admitted.job.job_id, placements=admitted.placements, funded=admitted.funded
        )

    def no_room(self) -> bool:
        """No GPU is left that a waiting job could take (backfill may use the GPUs held
        for the reservation). Without schedulable nodes, each job is told so."""
        held = self.reservation is not None and self.reservation.held
        return (
            bool(self.capacity.nodes) and not held and not any(self.capacity.free_by_model.values())
        )

    # --- one job ---

    def consider(self, job: JobRecord, position: int) -> None:
        held = self.state.holds.get(job.job_id)
        if held is not None and self._consider_held(job, position, held):
            return
        verdict, fresh = self._verdict(job, self._ends_before_reservation(job))
        if isinstance(verdict, list):
            return self._admit(job, verdict)
        code, params, detail = verdict
        if fresh and code in (NO_FIT, NO_BLOCK, BEHIND) and self._may_reserve():
            self._reserve(job, self.quotas.models_allowed(job.spec, self._models_of(job))[0])
            if self.reservation is not None:
                detail = {**detail, "estimated_start": self.reservation.starts_at}
        self._wait(job, position, code, params, detail)

    def _verdict(self, job: JobRecord, short: bool) -> tuple[list[Placement] | _Refusal, bool]:
        """Where the job starts, or why it cannot; and whether that was worked out afresh.
        Free space and quota room only shrink within a cycle: a job like one refused
        before (same account, same shape) is refused for the same reason."""
        spec = job.spec
        like = (spec.account, spec.workers, spec.gpus, spec.topology, spec.flavor, spec.cpus,
                spec.memory_mib, short)  # fmt: skip
        known = self._refused.get(like)
        if known is not None:
            refused, version = known
            if refused[0] in _ROOM_CODES and version != self.quotas.version:
                # Quota room shrank since: the first limit that binds is the one to tell.
                block = self.quotas.models_allowed(spec, self._models_of(job))[1]
                if block is not None:
                    refused = _quota_refusal(block)
                self._refused[like] = (refused, self.quotas.version)
            return refused, False
        verdict = self._judge(job, short)
        if not isinstance(verdict, list):
            self._refused[like] = (verdict, self.quotas.version)
        return verdict, True

    def fill(self, limit: int) -> None:
        """Step 6b, past the depth: up to ``limit`` more jobs, in queue order, of those
        that need no more GPUs than are left (free, or held for the reservation, which a job
        that ends before it starts may use), start where they fit. Those that do not are
        told nothing new, as any job past the depth."""
        if self.no_room():
            return
        if not any(self.capacity.free_by_model.values()) and not self._could_end_before():
            return  # only GPUs held for the reservation are free, and no job ends in time
        looked = {w.reason.job_id for w in self.waiting} | {a.job.job_id for a in self.admitted}
        left = self._left()
        for job in _ordered(self.state, self.ranked, self.now, self.policy, left):
            if limit == 0:
                return
            if job.job_id in looked or job.job_id in self.state.holds or job.spec.total_gpus > left:
                continue  # looked at, or kept for; or what is left shrank since the merge began
            limit -= 1
            short, spec = self._ends_before_reservation(job), job.spec
            shape = (spec.workers, spec.gpus, spec.topology, tuple(self._models_of(job)), short)
            if not self.quotas.by_model and shape in self._failed:
                # Its shape found no room on the models its quota allows (all, when quotas
                # do not name models; none would be a refusal anyway): refused, whatever
                # its quota, which a cycle past its depth states nothing about.
                continue
            verdict, _ = self._verdict(job, short)
            if isinstance(verdict, list):
                self._admit(job, verdict)  # only an admission leaves less room
                if self.no_room():
                    return
                left = self._left()

    def _could_end_before(self) -> bool:
        """Whether some waiting job declares a runtime that ends before the reservation
        starts (only such a job may use the GPUs held for it)."""
        runtimes, reserved = self.state.waiting_runtimes, self.reservation
        return (
            reserved is not None and bool(runtimes) and self.now + runtimes[0] <= reserved.starts_at
        )

    def _left(self) -> int:
        """The most GPUs a job could get now: the free GPUs of one model, and those held
        for the reservation."""
        held = sum(len(p.gpus) for p in self.reservation.held) if self.reservation else 0
        return max(self.capacity.free_by_model.values(), default=0) + held

    def behind(self, job: JobRecord, position: int) -> None:
        self._wait(job, position, BEHIND, {"need": job.spec.total_gpus})

    def _consider_held(self, job: JobRecord, position: int, held: list[Placement]) -> bool:
        """A job others are being stopped for: it starts once its GPUs are free. Whether
        it was dealt with; a hold nothing is being stopped for any more is let go."""
        self._hold(held, take=False)
        models = self.quotas.models_allowed(job.spec, self._models_of(job))[0]
        spec = job.spec
        placements = self.capacity.place(spec.workers, spec.gpus, spec.topology, models)
        if placements is not None:
            self._admit(job, placements)
            return True
        stopping = self.stopping_for.get(job.job_id, 0)
        if not stopping:
            self.holds.append(Hold(job_id=job.job_id, placements=[]))
            return False
        self._hold(held, take=True)
        self._wait(job, position, PREEMPTING, {}, {"stopping": stopping})
        return True

    def _hold(self, placements: list[Placement], take: bool) -> None:
        """Keep (or hand back) the GPUs of a hold that are free: not allocated in the log."""
        for placement in placements:
            node = self.state.nodes.get(placement.node_id)
            if node is None or placement.node_id not in self.capacity.nodes:
                continue
            free = [g for g in placement.gpus if g not in node.allocated]
            (self.capacity.take if take else self.capacity.give)(placement.node_id, free)

    def _judge(self, job: JobRecord, short: bool) -> list[Placement] | _Refusal:
        """Where the job goes now, or why it cannot."""
        spec = job.spec
        if not self.capacity.nodes:
            return NO_NODES, {}, {}
        if spec.flavor and spec.flavor not in self.capacity.free_by_model:
            unschedulable = {
                model_of(n) for n in self.state.nodes.values() if not n.schedulable and not n.lost
            }
            code = NODE_CORDONED if spec.flavor in unschedulable else NO_NODES
            return code, {"flavor": spec.flavor}, {}
        allowed, block = self.quotas.models_allowed(spec, self._models_of(job))
        if block is not None:
            return _quota_refusal(block)
        shape = (spec.workers, spec.gpus, spec.topology, tuple(allowed), short)
        if shape not in self._failed:
            placements = self._place(job, allowed, short)
            if placements is not None:
                return placements
            self._failed[shape] = self._why(job, allowed, short)
        code, params, detail = self._failed[shape]
        if spec.account in self.exhausted:
            budget: ReasonParams = {"account": self.exhausted[spec.account]}
            return BUDGET_EXHAUSTED, budget, {"then": code, **detail}
        return code, params, detail

    def _models_of(self, job: JobRecord) -> list[str]:
        return [job.spec.flavor] if job.spec.flavor else self.capacity.models

    def _place(self, job: JobRecord, models: list[str], short: bool) -> list[Placement] | None:
        spec = job.spec
        if not short or self.reservation is None:
            return self.capacity.place(spec.workers, spec.gpus, spec.topology, models)
        # It ends before the reservation starts, so it may use the held GPUs meanwhile.
        for held in self.reservation.held:
            self.capacity.give(held.node_id, held.gpus)
        placements = self.capacity.place(spec.workers, spec.gpus, spec.topology, models)
        taken = {(p.node_id, g) for p in placements or [] for g in p.gpus}
        still_held = []
        for held in self.reservation.held:
            gpus = [g for g in held.gpus if (held.node_id, g) not in taken]
            self.capacity.take(held.node_id, gpus)
            if gpus:
                still_held.append(Placement(node_id=held.node_id, gpus=gpus))
        self.reservation = msgspec.structs.replace(self.reservation, held=still_held)
        return placements

    def _admit(self, job: JobRecord, placements: list[Placement]) -> None:
        for placement in placements:
            self.capacity.take(placement.node_id, placement.gpus)
        model = self.capacity.nodes[placements[0].node_id].model
        self.quotas.charge(job.spec.account, needs(job.spec, model))
        funded = fund(self.state, job.spec, self.now, self.budget_reserved)
        self.admitted.append(_Admitted(job=job, placements=placements, funded=funded))

    def _wait(
        self,
        job: JobRecord,
        position: int,
        code: str,
        params: ReasonParams,
        detail: ReasonParams | None = None,
    ) -> None:
        reason = PendingReason(job_id=job.job_id, code=code, params=params)
        self.waiting.append(Waiting(reason=reason, position=position, detail=detail or {}))

    def _why(self, job: JobRecord, models: list[str], short: bool) -> _Refusal:
        """Why a job that quota allows does not fit: code, parameters, figures of the moment."""
        spec = job.spec
        need = spec.total_gpus
        if self.reservation is not None and not short:
            held = self.reservation.held
            for placement in held:
                self.capacity.give(placement.node_id, placement.gpus)
            fits = self.capacity.place(spec.workers, spec.gpus, spec.topology, models)
            for placement in held:
                self.capacity.take(placement.node_id, placement.gpus)
            if fits is not None:
                return (
                    RESERVED_FOR,
                    {"job": self.reservation.job_id},
                    {"estimated_start": self.reservation.starts_at},
                )
        free = max((self.capacity.free_by_model.get(m, 0) for m in models), default=0)
        if free >= need:
            largest = self.capacity.largest(spec.gpus, spec.topology, models)
            return NO_BLOCK, {"need": need, "topology": spec.topology}, {"largest": largest}
        if max((self.free_at_start.get(m, 0) for m in models), default=0) >= need:
            return BEHIND, {"need": need}, {"free": free}
        return NO_FIT, {"need": need}, {"free": free}

    # --- reservation and backfill ---

    def _ends_before_reservation(self, job: JobRecord) -> bool:
        runtime = job.spec.max_runtime_ns
        return (
            self.reservation is not None
            and runtime is not None
            and self.now + runtime <= self.reservation.starts_at
        )

    def _may_reserve(self) -> bool:
        """One reservation per cycle. When the head job has no estimate (what it waits for
        is held by jobs without a declared runtime), the next few may try, so that one
        unknowable job does not leave every other large job unprotected."""
        return self.reservation is None and self.reservation_tries < RESERVATION_TRIES

    def _reserve(self, job: JobRecord, models: list[str]) -> None:
        """Hold for ``job`` the GPUs it will take once enough running jobs have ended, by
        their declared runtimes; without declared runtimes there is no estimate and no hold."""
        self.reservation_tries += 1
        if not self.policy.backfill:
            return
        releases = self._releases()
        known = self._holders.reservations
        key = self._reservation_key(job, models)
        if key in known:
            reserved = known[key]
        else:
            reserved = known[key] = self._find_reservation(job, models, releases)
        if reserved is None:
            return
        starts_at, found = reserved
        held = []
        for placement in found:
            space = self.capacity.nodes[placement.node_id]
            free_now = {g for island in space.islands for g in island}
            gpus = [g for g in placement.gpus if g in free_now]
            if gpus:
                held.append(Placement(node_id=placement.node_id, gpus=gpus))
                self.capacity.take(placement.node_id, gpus)
        self.reservation = Reservation(
            job_id=job.job_id, starts_at=starts_at, placements=found, held=held
        )

    def _reservation_key(self, job: JobRecord, models: list[str]) -> tuple[object, ...]:
        """What a reservation depends on besides the holders: the job's shape, what this
        cycle admitted before it, and the time when a release's time depends on it."""
        spec = job.spec
        admitted = tuple(
            (a.job.job_id, tuple((p.node_id, tuple(p.gpus)) for p in a.placements))
            for a in self.admitted
        )
        timed = self._released_timed
        return (spec.workers, spec.gpus, spec.topology, tuple(models), admitted,
                self.now if timed else None)  # fmt: skip

    def _find_reservation(
        self, job: JobRecord, models: list[str], releases: list[tuple[int, dict[str, list[int]]]]
    ) -> "_Reserved":
        """The first release after which the job is placed, and where. Placement is tried
        only where upper bounds of the free GPUs (a GPU released twice counts twice) leave
        it a chance; the GPUs released are given back to a copy of the free ones only then,
        node by node."""
        spec = job.spec
        need = spec.total_gpus
        capacity = self.capacity
        # A worker needs a node with ``room`` free: the whole job's GPUs on one node, a
        # worker's for a gang that may spread.
        one_node = spec.workers == 1 or spec.topology in ("nvlink", "node")
        room, workers = (need, 1) if one_node else (spec.gpus, spec.workers)
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
            if slots < workers or (tried and not roomy):
                continue
            tried = True
            future = future or capacity.copy()
            for node_id, gpus in unapplied.items():
                future.give(node_id, gpus)
            unapplied = {}
            found = future.place(spec.workers, spec.gpus, spec.topology, models)
            if found is not None:
                return at, found
        return None

    def _releases(self) -> list[tuple[int, dict[str, list[int]]]]:
        """When GPUs held now come free, by declared runtimes, soonest first (ties by job)."""
        if self._released[0] == len(self.admitted):  # nothing admitted since: the same
            return self._released[1]
        ends = self._holders.ends
        timed = [a for a in self.admitted if a.job.spec.max_runtime_ns is not None]
        if not timed and ends.timeless(self.now):
            released = ends.released
        elif ends.timeless(self.now):  # what this cycle admitted, sorted into them
            order, released = list(ends.order), list(ends.released)
            for admitted in timed:
                end = self.now + (admitted.job.spec.max_runtime_ns or 0)
                at = bisect.bisect(order, (end, admitted.job.job_id))
                order.insert(at, (end, admitted.job.job_id))
                released.insert(at, (end, {p.node_id: p.gpus for p in admitted.placements}))
        else:
            listed = [
                (max(self.now, end if end is not None else self.now + runtime), job_id, placed)
                for end, runtime, job_id, placed in ends.listed
            ]
            for admitted in timed:
                end = self.now + (admitted.job.spec.max_runtime_ns or 0)
                placed = {p.node_id: p.gpus for p in admitted.placements}
                listed.append((end, admitted.job.job_id, placed))
            released = [(end, placed) for end, _, placed in sorted(listed, key=lambda e: e[:2])]
        self._released_timed = released is not ends.released
        self._released = (len(self.admitted), released)
        return released

    # --- preemption ---

    def preempt(self, rest: Iterable[tuple[int, JobRecord]], depth: int) -> None:
        """Step 8: waiting jobs short of room, in queue order, pick the cheapest running
        jobs they are owed (``allot.core.preemption``); the GPUs they will take are held
        for them. ``rest``: the jobs the cycle did not reach, in order, of which those
        within ``depth`` are scanned. Then jobs on draining nodes are stopped as their
        protection ends, as the drain's mode says (``allot.core.drain``)."""
        allowed = frozenset(self.policy.grounds)
        over_share = frozenset(a for a, s in self.ranked.items() if s.over_share)
        chosen_victims: set[str] = set()
        running = self._stoppable() if {TIER, FUNDED, FAIR_SHARE} & allowed else None
        may_claim = self._may_claim(running, over_share, allowed)
        if any(may_claim.values()):
            self._scan(rest, depth, running, may_claim, over_share, chosen_victims)
        for job_id, node_id in draining(self.state, self.now):
            if job_id not in chosen_victims and DRAIN in allowed:
                self.preemptions.append(
                    Preemption(job_id=job_id, code=DRAIN, params={"node": node_id})
                )

    def _stoppable(self) -> Stoppable:
        # Which accounts have jobs past the time slice matters only to fair share.
        time_slice = self.policy.time_slice_ns if FAIR_SHARE in self.policy.grounds else None
        restart_ms = self.policy.restart_overhead_ns // 1_000_000
        if self.memo is not None:
            return self.memo.stoppable.stoppable_jobs(self.state, self.now, restart_ms, time_slice)
        return stoppable_jobs(self.state, self.now, restart_ms, time_slice)

    def _may_claim(
        self, running: Stoppable | None, over_share: frozenset[str], allowed: frozenset[str]
    ) -> dict[tuple[str, str], bool]:
        """(tier, account) of each waiting queue -> whether any of its jobs could have
        grounds to stop a running job: ``could_claim`` with grounds that hold for the best
        placed job of the queue (funded if a budget is on its path; reclaiming with its
        account's smallest waiting job), so a cycle where no queue could skips the scan.
        ``running`` is needed for, and given with, the grounds other than RECLAIM."""
        budgets, claims = self.state.budgets, {}
        alike: dict[tuple[str, bool, bool], bool] = {}  # (tier, funded, under share) -> claim
        for tier, account in self.state.queues:
            funded = bool(budgets) and any(path in budgets for path in ancestry(account))
            under_share = account not in over_share
            claim = alike.get((tier, funded, under_share))
            if claim is None:
                grounds = Grounds(
                    funded=funded,
                    reclaims_from=frozenset(),  # judged below, where no other ground holds
                    under_share=under_share,
                    over_share=over_share,
                    allowed=allowed,
                )
                claim = alike[tier, funded, under_share] = could_claim(running, tier, grounds)
            claims[tier, account] = claim
        unclaimed = {account for (_, account), claim in claims.items() if not claim}
        # Reclaiming asks the quota book, account by account: only for the accounts no other
        # ground lets claim, each with the fewest GPUs one of its jobs needs.
        if unclaimed and RECLAIM in allowed and self.quotas.active:
            smallest: dict[str, int] = {}
            for gpus in sorted(self.state.sized_queues):
                for _, account in self.state.sized_queues[gpus]:
                    if account in unclaimed:
                        smallest.setdefault(account, gpus)
                if len(smallest) == len(unclaimed):
                    break
            borrowers = self.quotas.borrowers_against
            reclaiming = {account for account, gpus in smallest.items() if borrowers(account, gpus)}
            if reclaiming:
                claims = {queue: claim or queue[1] in reclaiming for queue, claim in claims.items()}
        return claims

    def _reclaims(self, account: str, gpus: int) -> frozenset[str]:
        """Whom ``account`` may reclaim quota from for a job of ``gpus``."""
        if RECLAIM not in self.policy.grounds or not self.quotas.active:
            return frozenset()
        return self.quotas.borrowers_against(account, gpus)

    def _scan(
        self,
        rest: Iterable[tuple[int, JobRecord]],
        depth: int,
        running: Stoppable | None,
        may_claim: dict[tuple[str, str], bool],
        over_share: frozenset[str],
        chosen_victims: set[str],
    ) -> None:
        """Waiting jobs short of room, in queue order, pick their victims (see preempt).
        Without ``running``, the policy preempts only to reclaim quota: the running jobs
        are looked at once some job could reclaim any."""
        tries = self.policy.preemptors_per_cycle
        # Jobs alike in what they may claim, that were owed nothing (or could not use what
        # they were owed): victims only get fewer as the cycle goes, so neither is one
        # like them.
        owed_nothing: set[tuple[object, ...]] = set()
        allowed = frozenset(self.policy.grounds)
        for n, job, position in self._short_of_room(rest, depth, may_claim):
            if tries == 0:
                break
            spec = job.spec
            alike = (spec.account, spec.tier, spec.workers, spec.gpus, spec.topology,
                     spec.flavor, spec.cpus, spec.memory_mib, spec.min_runtime_ns)  # fmt: skip
            if alike in owed_nothing:
                continue
            if n is None and self.quotas.models_allowed(spec, self._models_of(job))[1]:
                owed_nothing.add(alike)  # not reached, and its quota would refuse it
                continue
            grounds = Grounds(  # the dearer grounds only where some running job could meet them
                funded=(running is None or running.any_unfunded)
                and fund(self.state, spec, self.now, dict(self.budget_reserved)),
                reclaims_from=self._reclaims(spec.account, spec.total_gpus),
                under_share=spec.account not in over_share,
                over_share=over_share,
                allowed=allowed,
            )
            if not could_claim(running, spec.tier, grounds):
                owed_nothing.add(alike)
                continue
            running = running or self._stoppable()  # listed once some job could claim
            if not running.jobs:
                break
            owed = candidates(running, spec, grounds, chosen_victims)
            if not owed:
                owed_nothing.add(alike)
                continue
            tries -= 1
            models = self.quotas.models_allowed(spec, self._models_of(job))[0]
            own = (
                self.reservation
                if self.reservation and self.reservation.job_id == job.job_id
                else None
            )
            for held in own.held if own else []:  # what is held for it is its to use
                self.capacity.give(held.node_id, held.gpus)
            found = self._choose(spec, models, owed, grounds.reclaims_from, over_share)
            for held in own.held if own else []:
                # Held still, for this cycle: jobs behind it were told so (RESERVED_FOR).
                # Next cycle the hold alone speaks for it.
                self.capacity.take(held.node_id, held.gpus)
            if found is None:
                if own is None:
                    owed_nothing.add(alike)
                continue
            victims, placements = found
            code_of = {victim.job_id: code for victim, code in owed}
            for victim in victims:
                preemption = Preemption(
                    job_id=victim.job_id, code=code_of[victim.job_id], params={"for": job.job_id}
                )
                self.preemptions.append(preemption)
                chosen_victims.add(victim.job_id)
            self.holds.append(Hold(job_id=job.job_id, placements=placements))
            self._hold(placements, take=True)
            reason = PendingReason(job_id=job.job_id, code=PREEMPTING)
            stopping = Waiting(reason=reason, position=position, detail={"stopping": len(victims)})
            if n is None:
                self.waiting.append(stopping)
            else:
                self.waiting[n] = stopping

    def _choose(
        self,
        spec: JobSpec,
        models: list[str],
        owed: list[tuple[Victim, str]],
        borrowers: frozenset[str],
        over_share: frozenset[str],
    ) -> tuple[list[Victim], list[Placement]] | None:
        """The cheapest victims among those ``owed``. Where the policy ranks by fair share,
        quota is reclaimed from borrowers over their share when they suffice, and from
        those under it only when they do not (as Kueue's fair sharing reclaims from the
        queue most over its share first). A borrower under its share holds its GPUs
        because it ranked first; by cost alone its jobs, having started last, would be
        the first stopped."""
        victims = [victim for victim, _ in owed]
        if self.ranked:
            jobs = self.state.jobs

            def over(account: str) -> bool:  # the borrowing account on its path is
                return any(a in over_share for a in ancestry(account) if a in borrowers)

            preferred = [
                victim
                for victim, code in owed
                if code != RECLAIM or over(jobs[victim.job_id].spec.account)
            ]
            if preferred and len(preferred) < len(victims):
                found = choose(self.capacity, spec, models, preferred)
                if found is not None:
                    return found
        return choose(self.capacity, spec, models, victims)

    def _short_of_room(
        self,
        rest: Iterable[tuple[int, JobRecord]],
        depth: int,
        may_claim: dict[tuple[str, str], bool],
    ) -> Iterator[tuple[int | None, JobRecord, int]]:
        """Waiting jobs that lack only room, of the queues that ``may_claim``, in queue
        order, as (their index in ``waiting``, or None for one the cycle did not look at;
        the job; its position). The jobs the cycle looked at all come before those it did
        not reach."""
        holds, exhausted, jobs = self.state.holds, self.exhausted, self.state.jobs
        for n in range(len(self.waiting)):  # it grows with the jobs of ``rest`` only
            waiting = self.waiting[n]
            if waiting.reason.code in (NO_FIT, NO_BLOCK, BEHIND):
                job = jobs[waiting.reason.job_id]
                spec = job.spec
                if (
                    may_claim[spec.tier, spec.account]
                    and job.job_id not in holds
                    and spec.account not in exhausted
                ):
                    yield n, job, waiting.position
        free = self.capacity.free_by_model
        for position, job in rest:
            if position > depth:
                return
            spec = job.spec
            if not may_claim[spec.tier, spec.account]:
                continue
            if job.job_id in holds or spec.account in exhausted:
                continue
            if not spec.flavor or spec.flavor in free:
                yield None, job, position

    # --- elastic growth ---

    def grow_elastic(self) -> None:
        """Elastic jobs admitted in this cycle take free GPUs on their node (in their island,
        for ``nvlink``), up to their maximum, in queue order. Growing jobs already running
        needs a resize protocol with the node agent."""
        for admitted in self.admitted:
            spec = admitted.job.spec
            if spec.max_gpus is None or spec.max_gpus <= spec.gpus:
                continue
            placement = admitted.placements[0]
            space = self.capacity.nodes[placement.node_id]
            if spec.topology == "nvlink":
                spare = space.islands[space.home[placement.gpus[0]]]
            else:
                spare = sorted(g for island in space.islands for g in island)
            extra = min(spec.max_gpus - spec.gpus, len(spare))
            while extra and self.quotas.check_amounts(
                spec.account, gpu_amounts(extra, space.model)
            ):
                extra -= 1
            if not extra:
                continue
            more = spare[:extra]
            self.capacity.take(space.node_id, more)
            self.quotas.charge(spec.account, gpu_amounts(extra, space.model))
            grown = Placement(node_id=space.node_id, gpus=sorted(placement.gpus + more))
            admitted.placements = [grown]
