"""The events of the log.

Every event carries one envelope, ``meta``: a unique id, ``at`` (UTC, integer nanoseconds, set
by the publisher), the producing service and the version of the event's type it was written
at. Times and durations are integer nanoseconds; GPU quantities are integers.
"""

from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, ClassVar, Final, Literal, get_args

import msgspec

from allot.proto import limits
from allot.proto.codes import GroundCode, ReasonCode

# Every type's first version (docs/adr/0028). One number used to cover all types: 1, then 2
# when an admission got placements (one per node) instead of one node_id and its gpus. So
# every type starts at 2, and 1 means an event written before that change.
BASE_VERSION: Final = 2


class Meta(msgspec.Struct, frozen=True, kw_only=True):
    """The envelope every event carries. ``v``: the version of the event's type it was
    written at (each type has its own)."""

    id: str
    at: int
    producer: str
    v: int = BASE_VERSION  # the codec writes the type's VERSION, whatever this says


class Event(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    """Base of all events; subclasses pin their tag so the wire name never follows a rename.

    ``VERSION`` is the type's current version. Raise it, in the type's own class, when a
    change would make an older event of the type read wrong (a field renamed, retyped or
    given a new meaning), and register an upcaster from the old version in
    ``allot.proto.upcasters``. Adding a field with a default needs neither."""

    VERSION: ClassVar[int] = BASE_VERSION
    meta: Meta


class JobEvent(Event, frozen=True, kw_only=True):
    """An event about one job: appended under ``allot.evt.job.<job_id>.<type>``."""

    job_id: str


class NodeEvent(Event, frozen=True, kw_only=True):
    """An event about one node: appended under ``allot.evt.node.<node_id>.<type>``."""

    node_id: str


class AccountEvent(Event, frozen=True, kw_only=True):
    """An event about one account: appended under ``allot.evt.account.<path>.<type>``, the
    path's ``/`` written as ``.``."""

    path: str


# --- jobs -------------------------------------------------------------------------------


Tier = Literal["interactive", "batch", "best-effort"]
TIERS: Final[tuple[Tier, ...]] = ("interactive", "batch", "best-effort")  # in order of service

Topology = Literal["nvlink", "node", "rack", "any"]
# From the tightest to the loosest: where the GPUs of all workers of a job must be.
TOPOLOGIES: Final[tuple[Topology, ...]] = ("nvlink", "node", "rack", "any")

DEFAULT_GRACE_NS: Final = 30 * 10**9


def _within(description: str, **limits: object) -> msgspec.Meta:
    """A field's meaning and limits as the JSON Schema states them, for publishers to check
    before they send. Only stated here: ``allot.core.validate`` enforces them, with a
    message that names the field, the value and what is accepted."""
    return msgspec.Meta(description=description, extra_json_schema=limits)


_NS = "; integer nanoseconds"


class JobSpec(msgspec.Struct, frozen=True, kw_only=True):
    """What a user asked for: ``workers`` processes of ``gpus`` GPUs each, started all at
    once or not at all (a gang). Later fields arrive with defaults.

    In an event, a field this version does not know is passed over: the event may come
    from a newer writer. In a request or a job file it is refused
    (``allot.proto.commands.unknown_field``): a misspelt ``gpu_count`` must not run a job
    without it."""

    account: Annotated[
        str,
        _within(
            "the leaf account the job runs under and is charged to, e.g. 'lab/vision/alice'",
            pattern=limits.ACCOUNT_PATTERN,
        ),
    ]
    gpus: Annotated[
        int,
        _within(
            "GPUs per worker; an elastic job's minimum",
            minimum=1,
            maximum=limits.MAX_GPUS_PER_WORKER,
        ),
    ]
    command: Annotated[
        list[str],
        _within(
            "the program and its arguments; with env at most "
            f"{limits.MAX_ARGV_ENV_BYTES} bytes together",
            minItems=1,
            maxItems=limits.MAX_ARGS,
        ),
    ]
    name: Annotated[str, _within("a name to show", maxLength=limits.MAX_NAME)] = ""
    resumable: Annotated[
        bool, _within("it resumes from its last checkpoint when started again")
    ] = False
    env: Annotated[
        dict[str, str],
        _within(
            "environment variables (not ALLOT_* or CUDA_VISIBLE_DEVICES)",
            maxProperties=limits.MAX_ENV,
            propertyNames={"pattern": limits.ENV_NAME_PATTERN},
        ),
    ] = {}
    workdir: (
        Annotated[
            str, _within("an absolute path on the node", pattern="^/", maxLength=limits.MAX_PATH)
        ]
        | None
    ) = None
    # Per worker; with memory, makes the charge DRF-weighted (R10).
    cpus: Annotated[int, _within("CPUs per worker", minimum=0, maximum=limits.MAX_CPUS)] = 0
    memory_mib: Annotated[
        int, _within("memory per worker, MiB", minimum=0, maximum=limits.MAX_MEMORY_MIB)
    ] = 0
    # > 0 and a budget left: the job is funded (R8, R13).
    min_runtime_ns: Annotated[
        int,
        _within(
            "how long it runs before it may be preempted" + _NS,
            minimum=0,
            maximum=limits.MAX_MIN_RUNTIME_NS,
        ),
    ] = 0
    max_runtime_ns: (
        Annotated[
            int,
            _within(
                "the longest it runs, as declared (for reservations); not below min_runtime_ns"
                + _NS,
                minimum=1,
                maximum=limits.MAX_RUNTIME_NS,
            ),
        ]
        | None
    ) = None
    tier: Annotated[
        Tier, _within("interactive work goes before batch, batch before best-effort")
    ] = "batch"
    workers: Annotated[
        int,
        _within("processes started all at once (a gang)", minimum=1, maximum=limits.MAX_WORKERS),
    ] = 1
    topology: Annotated[
        Topology, _within("where the workers' GPUs must be, relative to each other")
    ] = "any"
    flavor: (
        Annotated[
            str,
            _within(
                "a GPU model, e.g. 'H100'; leave it out for any",
                minLength=1,
                maxLength=limits.MAX_FLAVOR,
            ),
        ]
        | None
    ) = None
    max_gpus: (
        Annotated[
            int,
            _within(
                "elastic (one worker): from gpus up to this many (R6)",
                minimum=1,
                maximum=limits.MAX_GPUS_PER_WORKER,
            ),
        ]
        | None
    ) = None
    checkpoint_interval_ns: (
        Annotated[
            int,
            _within(
                "how often it checkpoints, as declared" + _NS,
                minimum=1,
                maximum=limits.MAX_RUNTIME_NS,
            ),
        ]
        | None
    ) = None
    grace_ns: Annotated[
        int,
        _within(
            "from SIGTERM to SIGKILL when it is stopped" + _NS,
            minimum=0,
            maximum=limits.MAX_GRACE_NS,
        ),
    ] = DEFAULT_GRACE_NS

    @property
    def total_gpus(self) -> int:
        """GPUs the job needs to start."""
        return self.workers * self.gpus


class IndexRange(msgspec.Struct, frozen=True, array_like=True):
    """Indices ``first``, ``first + step``, ... up to ``last`` (``[0, 999, 1]``: 0-999)."""

    first: Annotated[int, _within("the first index", minimum=0, maximum=limits.MAX_ARRAY_INDEX)]
    last: Annotated[int, _within("the last index", minimum=0, maximum=limits.MAX_ARRAY_INDEX)]
    step: Annotated[int, _within("between indices", minimum=1)] = 1


class ArrayTasks(msgspec.Struct, frozen=True, kw_only=True):
    """A job array: the spec run once per index, each run a job of its own named
    ``<array id>_<index>`` (docs/adr/0035). Indices named twice are one task."""

    indices: Annotated[
        list[IndexRange],
        _within(
            f"at most {limits.MAX_ARRAY_TASKS} tasks in all",
            minItems=1,
            maxItems=limits.MAX_ARRAY_RANGES,
        ),
    ]
    max_running: (
        Annotated[
            int,
            _within(
                "at most this many tasks wait in the queue or hold GPUs at once",
                minimum=1,
                maximum=limits.MAX_ARRAY_TASKS,
            ),
        ]
        | None
    ) = None


class JobSubmitted(JobEvent, frozen=True, kw_only=True, tag="JobSubmitted"):
    spec: JobSpec
    idempotency_key: str | None = None
    by: str = ""  # the principal that submitted it, from its command's subject


class ArraySubmitted(JobSubmitted, frozen=True, kw_only=True, tag="ArraySubmitted"):
    """A job array submitted: ``job_id`` names the array, its tasks are jobs of their own
    (``allot.core.arrays``). A submission still: whatever reads submissions reads it."""

    array: ArrayTasks


class Submission(msgspec.Struct, frozen=True, kw_only=True):
    """One submission of a ``JobsSubmitted``: the event intake would have appended for it
    alone, and the trace context its request came with (W3C ``traceparent``,
    ``tracestate``): what a message's headers carry for an event appended alone."""

    event: JobSubmitted | ArraySubmitted
    trace: dict[str, str] = {}


class JobsSubmitted(Event, frozen=True, kw_only=True, tag="JobsSubmitted"):
    """Submissions intake took while its last append was being stored, appended together
    as one event (docs/adr/0036): each is folded as its own ``JobSubmitted`` would be, at
    this event's sequence, and one that does not fit is ignored alone. Appended under
    ``allot.evt.job.JobsSubmitted``. Its entries are at their types' current versions: a
    new version of ``JobSubmitted`` or ``ArraySubmitted`` is a new version of this too."""

    jobs: Annotated[
        list[Submission],
        _within(
            "the submissions, in the order intake took them",
            minItems=1,
            maxItems=limits.MAX_BATCH_JOBS,
        ),
    ]


def submissions(event: Event | None) -> tuple[JobSubmitted, ...]:
    """The submissions an event is or carries: itself, a batch's, or none."""
    if isinstance(event, JobSubmitted):
        return (event,)
    if isinstance(event, JobsSubmitted):
        return tuple(entry.event for entry in event.jobs)
    return ()


def job_events(event: Event | None) -> tuple[JobEvent, ...]:
    """The events about one job each that an event is or carries: itself, a batch's
    submissions, or none."""
    if isinstance(event, JobEvent):
        return (event,)
    if isinstance(event, JobsSubmitted):
        return tuple(entry.event for entry in event.jobs)
    return ()


class JobRejected(JobEvent, frozen=True, kw_only=True, tag="JobRejected"):
    """A submitted job that can never run (e.g. no node could ever hold it)."""

    field: str
    value: str
    message: str


class JobCancelRequested(JobEvent, frozen=True, kw_only=True, tag="JobCancelRequested"):
    reason: str = ""
    by: str = ""  # the principal that asked for it, from its command's subject


class JobCancelled(JobEvent, frozen=True, kw_only=True, tag="JobCancelled"):
    """A cancelled job that had been admitted but whose process never started."""

    node_id: str | None = None
    attempt: int = 0


class JobStarted(JobEvent, frozen=True, kw_only=True, tag="JobStarted"):
    node_id: str
    gpus: list[int]
    pid: int
    output_path: str
    attempt: int = 0  # which run of the job: 0, then one more per requeue
    # The physical devices behind ``gpus``, in the same order, where the node knows them:
    # what traces a faulty GPU to every job that ran on it.
    gpu_uuids: list[str] = []


class JobCheckpointed(JobEvent, frozen=True, kw_only=True, tag="JobCheckpointed"):
    """The job saved a checkpoint (``allot.workload.save``); its node agent saw the file.
    ``step`` numbers the job's checkpoints from 1, across attempts."""

    node_id: str
    path: str
    step: int | None = None


class JobExited(JobEvent, frozen=True, kw_only=True, tag="JobExited"):
    """The job's process ended. ``exit_code`` is None when the agent could not learn it."""

    node_id: str
    exit_code: int | None
    output_path: str
    reason: str = ""
    attempt: int = 0
    stopped_in_ns: int | None = None  # from the agent's SIGTERM to the exit, if it sent one


StopKind = Literal["preempt", "max_runtime"]


class StopRequested(JobEvent, frozen=True, kw_only=True, tag="StopRequested"):
    """Stop the job's processes: SIGTERM now, SIGKILL (on ``KillRequested``) once
    ``grace_ns`` has passed. A preempted job is then requeued or, not resumable, ends."""

    grace_ns: int
    reason: str
    kind: StopKind = "preempt"
    attempt: int = 0


class KillRequested(JobEvent, frozen=True, kw_only=True, tag="KillRequested"):
    reason: str
    attempt: int = 0


class JobPreempted(JobEvent, frozen=True, kw_only=True, tag="JobPreempted"):
    """A preempted attempt has stopped. ``lost_gpu_ms``: GPU time since its last checkpoint
    (all of it, for a job that cannot resume)."""

    lost_gpu_ms: int
    checkpoint_age_ns: int | None
    grace_used_ns: int
    attempt: int = 0


class GraceTooShort(JobEvent, frozen=True, kw_only=True, tag="GraceTooShort"):
    """A stopped job did not exit within its grace period: it needs longer to checkpoint
    than it declared (``measured_ns`` is at least the grace it was given)."""

    grace_ns: int
    measured_ns: int


class JobRequeued(JobEvent, frozen=True, kw_only=True, tag="JobRequeued"):
    reason: str


class MaxWaitExceeded(JobEvent, frozen=True, kw_only=True, tag="MaxWaitExceeded"):
    """A job has waited longer than its account's maximum-wait target (R11); appended by
    the planner once per job attempt."""

    account: str  # the account whose target it is: the job's own or the nearest ancestor's
    attempt: int
    waited_ns: int
    max_wait_ns: int


# --- plans ------------------------------------------------------------------------------

ReasonParams = dict[str, int | str]


class Placement(msgspec.Struct, frozen=True, kw_only=True):
    """The GPUs a job gets on one node; a gang has one placement per node it spans."""

    node_id: str
    gpus: list[int]


class Admission(msgspec.Struct, frozen=True, kw_only=True):
    job_id: str
    placements: list[Placement]  # in node-rank order: the first node's host leads the gang
    funded: bool = False  # unfunded work runs on idle capacity and may be preempted (R8)
    # Started on GPUs set aside for a reservation, though it may run past the reservation's
    # start: stopped when the reserved job can start (ground LENT). Written only when true:
    # plans that lend nothing are written as before.
    lent: bool | msgspec.UnsetType = msgspec.UNSET


class PendingReason(msgspec.Struct, frozen=True, kw_only=True):
    """Why a job is not admitted: a stable code (``allot.proto.codes``) and its parameters."""

    job_id: str
    code: ReasonCode
    params: ReasonParams = {}


class Preemption(msgspec.Struct, frozen=True, kw_only=True):
    """A running job chosen to stop, on what ground (``allot.proto.codes``) and for whom."""

    job_id: str
    code: GroundCode
    params: ReasonParams = {}


class Hold(msgspec.Struct, frozen=True, kw_only=True):
    """GPUs kept for a waiting job while the jobs preempted for it stop: nobody else may
    take them once they are free."""

    job_id: str
    placements: list[Placement]


class AccountRank(msgspec.Struct, frozen=True, kw_only=True):
    """Where an account stood in the fair-share order when a plan was made: the numbers
    behind its rank, so users can see the sort metric (ppm: parts per million)."""

    account: str
    rank: int
    share_ppm: int  # its share among its siblings
    usage_ppm: int  # its decayed usage among its siblings
    usage_gpu_ms: int  # its decayed usage
    level_factor_ppm: int | None  # share / usage; None: no usage yet (ranks first)


class PlanComputed(Event, frozen=True, kw_only=True, tag="PlanComputed"):
    """A decision, with what it was computed from: the log prefix up to ``basis_seq``,
    the clock reading ``now`` and the policy identified by its content hash."""

    basis_seq: int
    now: int
    policy: str
    policy_hash: str
    code_version: str
    admissions: list[Admission] = []
    pending: list[PendingReason] = []
    preemptions: list[Preemption] = []
    ranks: list[AccountRank] = []  # accounts with pending jobs
    holds: list[Hold] = []


class PolicyAdopted(Event, frozen=True, kw_only=True, tag="PolicyAdopted"):
    """A planner started with this policy: plans name it by its hash, replay finds it here."""

    name: str
    policy_hash: str
    policy_json: str  # the policy's settings, as the planner's core encodes them


# --- nodes ------------------------------------------------------------------------------


class GpuInfo(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One device work can be placed on: a whole GPU, or a MIG instance of one (then its
    model names the profile, e.g. ``NVIDIA A100-SXM4-80GB MIG 1g.10gb``, and ``parent`` is
    the index NVML gives the physical GPU). ``index`` is the device's slot on its node."""

    index: int
    model: str
    memory_mib: int
    uuid: str = ""  # GPU-… or MIG-…; empty on nodes that do not know it
    pci_bus_id: str = ""  # of the physical GPU
    parent: int | None = None  # a MIG instance's GPU


class NodeRegistered(NodeEvent, frozen=True, kw_only=True, tag="NodeRegistered"):
    """A node agent (re)started and reports its inventory."""

    hostname: str
    gpus: list[GpuInfo]
    cpus: int = 0
    memory_mib: int = 0
    simulated: bool = True
    labels: dict[str, str] = {}  # topology and more: rack, block, ...
    nvlink_islands: list[list[int]] = []  # GPU indices that share NVLink, one list per island
    # What the inventory could not learn, e.g. a GPU that answered nothing: reported, not
    # guessed, and such a GPU is not offered.
    problems: list[str] = []


# What makes a GPU unhealthy (``allot.core.gpuhealth`` says which are cleared only by an
# operator, and which make the whole host suspect).
GpuFaultKind = Literal[
    "xid",
    "ecc_uncorrected",
    "retired_pages_pending",
    "row_remap_pending",
    "row_remap_failed",
    "gpu_lost",
    "thermal_slowdown",
    "power_slowdown",
    "unanswered",
]


class NodeHealthChanged(NodeEvent, frozen=True, kw_only=True, tag="NodeHealthChanged"):
    """A node, or one GPU of it (``gpu``, its index), turned healthy or unhealthy."""

    healthy: bool
    reason: str
    gpu: int | None = None  # None: the whole node
    fault: GpuFaultKind | None = None  # why a GPU turned unhealthy


class NodeLost(NodeEvent, frozen=True, kw_only=True, tag="NodeLost"):
    last_seen_ns: int
    timeout_ns: int


class NodeCordoned(NodeEvent, frozen=True, kw_only=True, tag="NodeCordoned"):
    """Nothing new lands on the node. With ``drain`` its jobs are stopped too: resumable
    ones once past their minimum runtime, the others left to finish (or to reach their
    ``max_runtime``); with ``now`` as well, every job once past its minimum runtime."""

    drain: bool = False
    reason: str = ""
    by: str = ""  # the principal that asked for it, from its command's subject
    # True by default: drains recorded before graceful ones existed stopped every job.
    now: bool = True


class NodeUncordoned(NodeEvent, frozen=True, kw_only=True, tag="NodeUncordoned"):
    """New work may be placed on the node again."""

    by: str = ""  # the principal that asked for it, from its command's subject


class NodeDrained(NodeEvent, frozen=True, kw_only=True, tag="NodeDrained"):
    """A node being drained holds no more jobs."""


# --- accounts ---------------------------------------------------------------------------


PreemptionScope = Literal["never", "lower-tier", "any"]


class AccountPreemption(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True
):
    """Which running jobs an account's waiting jobs may stop, within what the planner's
    policy allows (docs/adr/0032): jobs of the same account; jobs of accounts that borrow
    from the cohort, when the waiting job is within its nominal quota (reclaiming) and when
    it would borrow itself. ``lower-tier``: only jobs of a less urgent tier."""

    within_account: PreemptionScope = "any"
    reclaim_within_cohort: PreemptionScope = "any"
    borrow_within_cohort: PreemptionScope = "any"
    # While borrowing, stop only jobs of this tier or a less urgent one (None: any tier).
    borrow_max_tier: Tier | None = None


class AccountSettings(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True
):
    """One account of the tree. Its parent is its path without the last segment.

    Resources are ``gpu``, ``gpu:<model>``, ``cpu`` and ``memory_mib``. A resource missing
    from ``borrowing_limit`` may be borrowed without limit; one missing from
    ``lending_limit`` may be lent in full. Defaults are left out when written: a big tree's
    settings are mostly defaults, and all of an apply's changes go in one event."""

    weight: int = 1  # share of its parent's GPU time, relative to its siblings
    quota: dict[str, int] = {}  # nominal (guaranteed) amount per resource
    borrowing_limit: dict[str, int] = {}  # how far beyond its quota it may borrow
    lending_limit: dict[str, int] = {}  # how much of its quota others may borrow
    max_wait_ns: int | None = None  # the longest a job should wait (R11)
    # Who may submit to it and below (docs/adr/0015); where no account on a path names
    # members or admins, anyone may.
    members: list[str] = []
    admins: list[str] = []  # members who may also cancel any job of it and below
    # Which jobs its waiting jobs may stop; None: as its parent says (the defaults at the top).
    preemption: AccountPreemption | None = None


class AccountDefined(AccountEvent, frozen=True, kw_only=True, tag="AccountDefined"):
    settings: AccountSettings


class AccountUpdated(AccountEvent, frozen=True, kw_only=True, tag="AccountUpdated"):
    settings: AccountSettings


class AccountRemoved(AccountEvent, frozen=True, kw_only=True, tag="AccountRemoved"):
    """The account is gone; it had no pending or running jobs."""


class AccountsApplied(Event, frozen=True, kw_only=True, tag="AccountsApplied"):
    """One ``accounts apply``: every change it makes to the tree (docs/adr/0013). The fold
    takes all of it or, if any part does not fit the tree it meets, none of it. Appended
    under ``allot.evt.account.AccountsApplied``; logs written before it say the same with
    one ``AccountDefined``, ``AccountUpdated`` or ``AccountRemoved`` per account."""

    defined: dict[str, AccountSettings] = {}
    updated: dict[str, AccountSettings] = {}
    removed: list[str] = []
    basis_seq: int = 0  # the last sequence the ledger had folded when it computed them
    by: str = ""  # the principal that asked for it, from its command's subject


class BudgetGranted(AccountEvent, frozen=True, kw_only=True, tag="BudgetGranted"):
    """GPU time the account (with everything below it) may use per period, from
    ``starts_at`` on; it replaces any earlier grant to the account."""

    gpu_ms: int
    period_ns: int
    starts_at: int
    share_ppm: int | None = None  # set when granted as a share of cluster time
    by: str = ""  # the principal that asked for it, from its command's subject


class BudgetExhausted(AccountEvent, frozen=True, kw_only=True, tag="BudgetExhausted"):
    """The account used its budget for the period; its new work runs unfunded."""

    period: int  # periods since the grant's start, from 0
    used_gpu_ms: int
    budget_gpu_ms: int


class UsageCharged(AccountEvent, frozen=True, kw_only=True, tag="UsageCharged"):
    """GPU time of one job attempt from ``from_ns`` to ``to_ns``, charged to the account
    (``path``) and all its ancestors. ``gpu_ms`` is DRF-weighted: the job's dominant share
    of the cluster, in GPUs, times the milliseconds."""

    job_id: str
    attempt: int
    from_ns: int
    to_ns: int
    gpu_ms: int


# --- the log itself ---------------------------------------------------------------------


class EventQuarantined(Event, frozen=True, kw_only=True, tag="EventQuarantined"):
    """An operator's word that the event at ``seq`` is not to be folded: from here on, the
    state is the fold of the log before this event without it (``allot log quarantine``)."""

    seq: int
    reason: str
    by: str = ""  # the operator who said so


# The tagged union the codec decodes into: the one list of event types. Everything else that
# enumerates them (``EVENT_TYPES``, ``EVENT_BY_TAG``) is derived from it, so a new event is
# added here once. ``tests/unit/test_contracts.py`` fails for an event class left out.
AnyEvent = (
    JobSubmitted
    | ArraySubmitted
    | JobsSubmitted
    | JobRejected
    | JobCancelRequested
    | JobCancelled
    | JobStarted
    | JobCheckpointed
    | JobExited
    | StopRequested
    | KillRequested
    | JobPreempted
    | JobRequeued
    | GraceTooShort
    | MaxWaitExceeded
    | PlanComputed
    | PolicyAdopted
    | NodeRegistered
    | NodeHealthChanged
    | NodeLost
    | NodeCordoned
    | NodeUncordoned
    | NodeDrained
    | AccountDefined
    | AccountUpdated
    | AccountRemoved
    | AccountsApplied
    | UsageCharged
    | BudgetGranted
    | BudgetExhausted
    | EventQuarantined
)

EVENT_TYPES: Final[tuple[type[Event], ...]] = get_args(AnyEvent)
# Wire name (the pinned ``type`` tag) -> event class.
EVENT_BY_TAG: Final[Mapping[str, type[Event]]] = MappingProxyType(
    {str(kind.__struct_config__.tag): kind for kind in EVENT_TYPES}
)
