"""The state that folding the log builds: jobs, nodes, and what was ignored and why."""

import bisect
import enum
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from allot.proto.events import (
    AccountSettings,
    ArrayTasks,
    GpuInfo,
    JobSpec,
    PendingReason,
    Placement,
    Preemption,
    StopRequested,
)

if TYPE_CHECKING:
    from allot.core.validate import ClusterLimits


class JobStatus(enum.StrEnum):
    PENDING = "pending"
    ADMITTED = "admitted"  # placed by a plan, process not yet started
    RUNNING = "running"
    PREEMPTED = "preempted"  # stopped by preemption, waiting to be requeued
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    LOST = "lost"  # its node was lost and it could not be requeued
    REJECTED = "rejected"

    @property
    def terminal(self) -> bool:
        return self in _TERMINAL

    @property
    def holds_gpus(self) -> bool:
        return self in (JobStatus.ADMITTED, JobStatus.RUNNING)


_TERMINAL = frozenset(
    {JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED, JobStatus.LOST, JobStatus.REJECTED}
)


class JobRecord(msgspec.Struct, kw_only=True):
    job_id: str
    spec: JobSpec
    status: JobStatus
    submitted_seq: int
    submitted_at: int
    queued_at: int  # when it last began to wait: its submission, or its latest requeue
    idempotency_key: str | None = None
    submitted_by: str = ""  # the principal; "" for a job submitted without identities
    # Node id -> the GPUs this attempt holds there, in node-rank order (a gang spans several).
    placements: dict[str, list[int]] = {}
    started_on: dict[str, int] = {}  # node id -> pid of this attempt's process there
    exited_on: dict[str, int | None] = {}  # node id -> exit code of this attempt's process
    admitted_at: int | None = None
    started_at: int | None = None  # its first process started
    ended_at: int | None = None
    exit_code: int | None = None
    output_path: str | None = None
    last_checkpoint_at: int | None = None
    checkpoint_step: int = 0  # the last checkpoint reported, numbered across attempts
    cancel_requested: bool = False
    # Preemption of the current attempt: chosen by a plan, then stopped by the executor.
    preemption: Preemption | None = None
    stop: StopRequested | None = None
    kill_requested: bool = False
    stopped_in_ns: int | None = None  # SIGTERM to exit, the longest of its processes
    preempted_at: int | None = None  # when its JobPreempted was recorded
    preemptions: int = 0  # over all attempts
    lost_gpu_ms: int = 0  # GPU time lost to preemptions, over all attempts
    grace_too_short_ns: int | None = None  # measured stop time, when it exceeded the grace
    funded: bool = False  # as its admission said
    lent: bool = False  # as its admission said: on GPUs set aside for a reservation
    attempts: int = 0
    reason: PendingReason | None = None  # why it waits, as the last plan said
    # A task of a job array: the array's id and this task's index; ``array_held`` while it
    # waits for the array's limit, outside the queue (``ArrayRecord``).
    array_id: str | None = None
    array_index: int = 0
    array_held: bool = False
    max_wait_exceeded: bool = False  # this attempt's wait was reported as too long
    end_reason: str = ""

    @property
    def node_ids(self) -> list[str]:
        return list(self.placements)

    @property
    def gpu_count(self) -> int:
        """GPUs held now: more than the spec's minimum when an elastic job got extra."""
        return sum(map(len, self.placements.values()))


class ArrayRecord(msgspec.Struct, kw_only=True):
    """A job array: its tasks in index order, and how many of them the queue has been given.
    With ``max_running``, tasks ``tasks[released:]`` wait outside the queue (those that have
    not ended), and one is released whenever one that was released ends."""

    array_id: str
    spec: JobSpec
    array: ArrayTasks
    tasks: list[str]
    submitted_seq: int
    submitted_at: int
    submitted_by: str = ""
    released: int = 0  # tasks from the first let into the queue, or ended before that
    active: int = 0  # of those, the ones that have not ended
    cancel_requested: bool = False


class GpuFaultRecord(msgspec.Struct, frozen=True, kw_only=True):
    """Why a GPU (or a node) is unhealthy, as ``NodeHealthChanged`` recorded it."""

    kind: str
    reason: str
    since: int  # ns


class NodeRecord(msgspec.Struct, kw_only=True):
    node_id: str
    hostname: str
    gpus: list[GpuInfo]
    registered_at: int
    # The log sequence of its first registration (kept when it registers again): nodes are
    # listed, and ties between them broken, in this order, so that no name decides.
    registered_seq: int
    cpus: int = 0
    memory_mib: int = 0
    labels: dict[str, str] = {}
    nvlink_islands: list[list[int]] = []
    healthy: bool = True
    fault: GpuFaultRecord | None = None  # why the whole node is unhealthy, where one said
    # GPU index -> why that GPU is unhealthy; no work is placed on it. Replaced, never
    # changed in place, so that what is derived from it can tell it changed.
    gpu_faults: dict[int, GpuFaultRecord] = {}
    health_changes: int = 0  # health transitions recorded, so each is appended once
    lost: bool = False
    cordoned: bool = False
    cordon_reason: str = ""
    cordoned_by: str = ""
    draining: bool = False  # cordoned, and its jobs are stopped as the drain's mode says
    drain_now: bool = False  # the drain stops every job, not only those that can resume
    drained: bool = False
    drains: int = 0  # drains begun, so each one's end is recorded once
    # GPU index -> job id holding it. Kept by the fold so planning need not scan all jobs.
    allocated: dict[int, str] = {}

    @property
    def schedulable(self) -> bool:
        return self.healthy and not self.lost and not self.cordoned

    def free_gpus(self) -> list[int]:
        """The GPUs work could be placed on now: neither held nor faulty."""
        return [
            g.index
            for g in self.gpus
            if g.index not in self.allocated and g.index not in self.gpu_faults
        ]


HOUR_NS = 3600 * 10**9


class UnbilledRun(msgspec.Struct, kw_only=True):
    """GPU time of one job attempt that the ledger has not charged yet."""

    account: str
    gpus: int
    cpus: int
    memory_mib: int
    from_ns: int  # charged up to here
    until_ns: int | None = None  # when the attempt stopped holding GPUs; None while it runs


KEEP_HOURLY = 48  # hours of usage kept hour by hour, before the latest charged


class AccountUsage(msgspec.Struct, kw_only=True):
    """What an account (with everything below it) was charged: in total, and per bucket of
    the time it was used, so fair share can decay or window it with any policy.

    A bucket is an hour index (ns // HOUR_NS). Usage more than ``KEEP_HOURLY`` hours older
    than the latest charged is merged into its day, kept under the day's last hour: fair
    share reads a few hundred buckets however long the history (docs/adr/0005)."""

    total_gpu_ms: int = 0
    by_hour: dict[int, int] = {}  # hour -> GPU-ms used in it, from ``daily_before`` on
    by_day: dict[int, int] = {}  # the last hour of a day -> GPU-ms used in it, before that
    daily_before: int = 0  # hours before this one are kept per day
    latest: int = -1  # the latest hour charged
    late_charges: int = 0  # charges for hours already kept per day

    def add(self, hour: int, gpu_ms: int) -> None:
        if hour < self.daily_before:
            day = _day_end(hour)
            self.by_day[day] = self.by_day.get(day, 0) + gpu_ms
            self.late_charges += 1
            return
        self.by_hour[hour] = self.by_hour.get(hour, 0) + gpu_ms
        if hour <= self.latest:
            return
        self.latest = hour
        boundary = (hour - KEEP_HOURLY) // 24 * 24
        if boundary > self.daily_before:
            for old in [h for h in self.by_hour if h < boundary]:
                day = _day_end(old)
                self.by_day[day] = self.by_day.get(day, 0) + self.by_hour.pop(old)
            self.daily_before = boundary


def split(start: int, end: int, amount: int, origin: int, unit: int) -> list[tuple[int, int]]:
    """``amount`` spread evenly over ``[start, end)``, as (index of the unit-long slot from
    ``origin``, share); integer shares that add up to ``amount`` exactly."""
    pieces: list[tuple[int, int]] = []
    given = 0
    cursor = start
    while cursor < end:
        slot = (cursor - origin) // unit
        stop = min(end, origin + (slot + 1) * unit)
        share = amount * (stop - start) // (end - start) - given
        pieces.append((slot, share))
        given += share
        cursor = stop
    return pieces


def _day_end(hour: int) -> int:
    return hour // 24 * 24 + 23


# An account tree as owed is filled down it: weights, each account's ancestry (itself
# first), each parent's children (None: the top).
OwedTree = tuple[dict[str, int], dict[str, tuple[str, ...]], dict[str | None, list[str]]]


class OwedRates:
    """The rates owed accrues at, and the account tree they were filled down, each kept
    until what it was computed from changes; derived from the state, never stored."""

    __slots__ = ("key", "rates", "tree", "tree_version")

    def __init__(self) -> None:
        self.key: tuple[int, int, int] | None = None
        self.rates: dict[str, int] = {}
        self.tree_version = -1
        self.tree: OwedTree = ({}, {}, {})


class Budget(msgspec.Struct, kw_only=True):
    """GPU time an account may use per period, and what it used in each period."""

    gpu_ms: int
    period_ns: int
    starts_at: int
    used: dict[int, int] = {}  # period (from 0 at starts_at) -> GPU-ms charged in it
    exhausted: dict[int, None] = {}  # periods the ledger announced as used up

    def period_at(self, at: int) -> int | None:
        return None if at < self.starts_at else (at - self.starts_at) // self.period_ns

    def left(self, at: int) -> int:
        period = self.period_at(at)
        return 0 if period is None else self.gpu_ms - self.used.get(period, 0)


MAX_IGNORED_KEPT = 1000


class Ignore(Exception):
    """Raised by a fold rule when an event does not apply to the state it meets."""


class IgnoredEvent(msgspec.Struct, frozen=True, kw_only=True):
    """An event the fold could not apply to the state it met, and why."""

    seq: int
    type: str
    reason: str


class ChangeFeed:
    """Keys in the order they changed, for a view to catch up on what changed since it
    last looked instead of reading everything again. Only the latest are kept: a view
    further behind than that reads everything again."""

    KEEP = 4096

    def __init__(self) -> None:
        self._keys: list[str] = []
        self._start = 0  # how many keys were dropped before ``_keys[0]``

    @property
    def end(self) -> int:
        """A position to ask ``since`` from later."""
        return self._start + len(self._keys)

    def add(self, key: str) -> None:
        self._keys.append(key)
        if len(self._keys) > 2 * self.KEEP:
            del self._keys[: self.KEEP]
            self._start += self.KEEP

    def since(self, position: int) -> list[str] | None:
        """The keys changed after ``position`` (an ``end`` of this feed read before), in
        order, repeats included; None if they are no longer all kept, or ``position`` was
        never one of this feed's."""
        if not self._start <= position <= self.end:
            return None
        return self._keys[position - self._start :]


class FeedReader:
    """How far a view has read a ``ChangeFeed``, and what it was built from besides."""

    def __init__(self) -> None:
        self._feed: ChangeFeed | None = None  # kept: so that its identity is not another's
        self._basis: object = None
        self._read = 0

    def changed(self, feed: ChangeFeed, basis: object) -> list[str] | None:
        """The keys ``feed`` changed since the last call; None if the view must read
        everything again: another feed (another state), another ``basis`` (what else the
        view depends on), or keys no longer kept."""
        same = feed is self._feed and basis == self._basis
        changed = feed.since(self._read) if same else None
        self._feed, self._basis, self._read = feed, basis, feed.end
        return changed


class State:
    """Everything the log says, folded. Owned and mutated by ``allot.core.apply`` only."""

    def __init__(self) -> None:
        self.seq = 0  # last stream sequence folded
        self.jobs: dict[str, JobRecord] = {}
        self.nodes: dict[str, NodeRecord] = {}
        self.arrays: dict[str, ArrayRecord] = {}  # job arrays by id; their tasks are jobs
        # Job ids waiting for a plan; insertion order is log order.
        self.pending: dict[str, None] = {}
        # (tier, account) -> its waiting jobs as ``QueueEntry``, in submission order: a
        # planner merges these few queues instead of sorting every waiting job.
        self.queues: dict[tuple[str, str], list[QueueEntry]] = {}
        # The same by the GPUs a job needs: GPUs -> (tier, account) -> its waiting jobs of
        # that size. A cycle that looks past its depth for jobs that fit what is left merges
        # only the queues of the sizes that could, and finds each account's smallest job.
        self.sized_queues: dict[int, dict[tuple[str, str], list[QueueEntry]]] = {}
        # The declared runtimes of the waiting jobs that declare one, shortest first: when
        # only GPUs held for a reservation are free, a cycle sees whether a job could end
        # before the reservation starts without looking at each.
        self.waiting_runtimes: list[int] = []
        # Waiting jobs no plan has stated a reason for yet, in log order.
        self.unstated: dict[str, None] = {}
        # (who submitted, account, key) -> job id: a key names a submission of its sender.
        self.idempotency: dict[tuple[str, str, str], str] = {}
        self.accounts: dict[str, AccountSettings] = {}  # path -> settings
        self.job_accounts: dict[str, None] = {}  # every account a job was submitted to
        self.unbilled: dict[tuple[str, int], UnbilledRun] = {}  # (job id, attempt) -> run
        self.usage: dict[str, AccountUsage] = {}  # account path -> charges
        self.budgets: dict[str, Budget] = {}  # account path -> its current grant
        # What each account is owed (``allot.core.entitlement``): GPUs its jobs want (waiting
        # or running); GPU time owed, per path as ``usage`` is charged, accrued up to
        # ``owed_until``; and the rates it accrues at, kept until what they were computed
        # from changes (not stored: derived).
        self.wanted: dict[str, int] = {}
        self.wanted_version = 0
        self.owed: dict[str, AccountUsage] = {}
        self.owed_until = 0
        self.owed_rates = OwedRates()
        # What the nodes allow a job (``allot.core.validate``), kept until they change (not
        # stored: derived; kept here so that a refold's ``become`` takes it along).
        self.cluster_limits: ClusterLimits | None = None
        # Job holding GPUs (admitted or running) -> what it holds of each quota resource,
        # and those summed per account path, below it included: a planning cycle reads
        # these, not every node.
        self.holders: dict[str, dict[str, int]] = {}
        self.quota_used: dict[str, dict[str, int]] = {}
        # Waiting job -> GPUs kept for it while the jobs preempted for it stop.
        self.holds: dict[str, list[Placement]] = {}
        self.stopped: dict[str, None] = {}  # preempted jobs not yet requeued or ended
        self.policies: dict[str, str] = {}  # policy hash -> its settings (JSON)
        self.fair_share_version = 0  # bumped whenever the accounts change (not their usage)
        self.usage_version = 0  # bumped with every charge
        self.owed_version = 0  # bumped whenever what accounts were owed grew
        self.nodes_version = 0  # bumped whenever a node changes (not what it holds)
        # Bumped whenever what jobs hold or the GPUs kept for waiting jobs may have changed,
        # or how a holder runs (started, checkpointed, being stopped or cancelled)...
        self.holders_version = 0
        # ...and the jobs that changed so, for views that catch up on them (node events
        # change holders without naming them here: they bump ``nodes_version``).
        self.holder_changes = ChangeFeed()
        self.ignored: list[IgnoredEvent] = []  # the latest ones
        self.ignored_count = 0  # all of them
        self.last_plan_seq = 0
        self.quarantined: dict[int, str] = {}  # sequence -> why it is not folded
        self.refold_due = False  # a new quarantine: the log must be folded again without it
        self.refolds = 0  # how often it was: views kept of an earlier fold are stale

    def become(self, other: "State") -> None:
        """Take ``other``'s contents, for holders of this object (a refold's result)."""
        vars(self).clear()
        vars(self).update(vars(other))

    def enqueue(self, job: JobRecord) -> None:
        """``job`` waits for a plan (again)."""
        self.pending[job.job_id] = None
        self.unstated[job.job_id] = None
        entry, group = queue_entry(job), (job.spec.tier, job.spec.account)
        bisect.insort(self.queues.setdefault(group, []), entry)
        sized = self.sized_queues.setdefault(job.spec.total_gpus, {})
        bisect.insort(sized.setdefault(group, []), entry)
        if job.spec.max_runtime_ns is not None:
            bisect.insort(self.waiting_runtimes, job.spec.max_runtime_ns)

    def dequeue(self, job: JobRecord) -> None:
        """``job`` waits no more (admitted or ended); nothing if it was not waiting."""
        if self.pending.pop(job.job_id, False) is False:
            return
        self.unstated.pop(job.job_id, None)
        entry, group = queue_entry(job), (job.spec.tier, job.spec.account)
        _unqueue(self.queues, group, entry)
        _unqueue(self.sized_queues[job.spec.total_gpus], group, entry)
        if not self.sized_queues[job.spec.total_gpus]:
            del self.sized_queues[job.spec.total_gpus]
        if job.spec.max_runtime_ns is not None:
            runtimes = self.waiting_runtimes
            del runtimes[bisect.bisect_left(runtimes, job.spec.max_runtime_ns)]

    def note_ignored(self, seq: int, type_name: str, reason: str) -> None:
        """Record an event the fold could not apply (the latest ones are kept)."""
        self.ignored.append(IgnoredEvent(seq=seq, type=type_name, reason=reason))
        self.ignored_count += 1
        if len(self.ignored) > MAX_IGNORED_KEPT:
            del self.ignored[: len(self.ignored) - MAX_IGNORED_KEPT]


# A waiting job in its queue: (submission seq, index in its array or 0, job id). The tasks
# of an array share a submission: they wait in the order of their indices.
QueueEntry = tuple[int, int, str]


def queue_entry(job: JobRecord) -> QueueEntry:
    return job.submitted_seq, job.array_index, job.job_id


_Group = TypeVar("_Group")


def _unqueue(queues: dict[_Group, list[QueueEntry]], key: _Group, entry: QueueEntry) -> None:
    queue = queues[key]
    del queue[bisect.bisect_left(queue, entry)]
    if not queue:
        del queues[key]


# A fold rule: folds one event of its type into the state, or raises Ignore.
FoldRule = Callable[[State, int, Any], None]


# The versions of a state that planners' memos key on, by attribute name; each fold module
# says which of them the events of each type change (``allot.core.fold.CHANGES``).
HOLDERS, NODES, ACCOUNTS, USAGE = (
    "holders_version",
    "nodes_version",
    "fair_share_version",
    "usage_version",
)
