"""The events of the log.

Every event carries one envelope, ``meta``: a unique id, ``at`` (UTC, integer nanoseconds, set
by the publisher), the producing service and the schema version. Times and durations are
integer nanoseconds; GPU quantities are integers.
"""

from typing import Final

import msgspec


class Meta(msgspec.Struct, frozen=True, kw_only=True):
    """The envelope every event carries."""

    id: str
    at: int
    producer: str
    v: int = 1


class Event(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    """Base of all events; subclasses pin their tag so the wire name never follows a rename."""

    meta: Meta


# --- jobs -------------------------------------------------------------------------------


class JobSpec(msgspec.Struct, frozen=True, kw_only=True):
    """What a user asked for. Later fields (workers, tiers, runtimes) arrive with defaults."""

    account: str
    gpus: int
    command: list[str]
    name: str = ""
    resumable: bool = False
    env: dict[str, str] = {}
    workdir: str | None = None


class JobSubmitted(Event, frozen=True, kw_only=True, tag="JobSubmitted"):
    job_id: str
    spec: JobSpec
    idempotency_key: str | None = None


class JobRejected(Event, frozen=True, kw_only=True, tag="JobRejected"):
    """A submitted job that can never run (e.g. no node could ever hold it)."""

    job_id: str
    field: str
    value: str
    message: str


class JobCancelRequested(Event, frozen=True, kw_only=True, tag="JobCancelRequested"):
    job_id: str
    reason: str = ""


class JobCancelled(Event, frozen=True, kw_only=True, tag="JobCancelled"):
    """A cancelled job that had been admitted but whose process never started."""

    job_id: str
    node_id: str | None = None
    attempt: int = 0


class JobStarted(Event, frozen=True, kw_only=True, tag="JobStarted"):
    job_id: str
    node_id: str
    gpus: list[int]
    pid: int
    output_path: str
    attempt: int = 0  # which run of the job: 0, then one more per requeue


class JobCheckpointed(Event, frozen=True, kw_only=True, tag="JobCheckpointed"):
    job_id: str
    node_id: str
    path: str
    step: int | None = None


class JobExited(Event, frozen=True, kw_only=True, tag="JobExited"):
    """The job's process ended. ``exit_code`` is None when the agent could not learn it."""

    job_id: str
    node_id: str
    exit_code: int | None
    output_path: str
    reason: str = ""
    attempt: int = 0


class StopRequested(Event, frozen=True, kw_only=True, tag="StopRequested"):
    job_id: str
    grace_ns: int
    reason: str


class KillRequested(Event, frozen=True, kw_only=True, tag="KillRequested"):
    job_id: str
    reason: str


class JobPreempted(Event, frozen=True, kw_only=True, tag="JobPreempted"):
    job_id: str
    lost_gpu_ms: int
    checkpoint_age_ns: int | None
    grace_used_ns: int


class JobRequeued(Event, frozen=True, kw_only=True, tag="JobRequeued"):
    job_id: str
    reason: str


# --- plans ------------------------------------------------------------------------------

ReasonParams = dict[str, int | str]


class Admission(msgspec.Struct, frozen=True, kw_only=True):
    job_id: str
    node_id: str
    gpus: list[int]


class PendingReason(msgspec.Struct, frozen=True, kw_only=True):
    """Why a job is not admitted: a stable code and its parameters."""

    job_id: str
    code: str
    params: ReasonParams = {}


class Preemption(msgspec.Struct, frozen=True, kw_only=True):
    job_id: str
    code: str
    params: ReasonParams = {}


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


# --- nodes ------------------------------------------------------------------------------


class GpuInfo(msgspec.Struct, frozen=True, kw_only=True):
    index: int
    model: str
    memory_mib: int


class NodeRegistered(Event, frozen=True, kw_only=True, tag="NodeRegistered"):
    """A node agent (re)started and reports its inventory."""

    node_id: str
    hostname: str
    gpus: list[GpuInfo]
    cpus: int = 0
    memory_mib: int = 0
    simulated: bool = True


class NodeHealthChanged(Event, frozen=True, kw_only=True, tag="NodeHealthChanged"):
    node_id: str
    healthy: bool
    reason: str


class NodeLost(Event, frozen=True, kw_only=True, tag="NodeLost"):
    node_id: str
    last_seen_ns: int
    timeout_ns: int


class NodeCordoned(Event, frozen=True, kw_only=True, tag="NodeCordoned"):
    node_id: str
    drain: bool = False
    reason: str = ""


class NodeUncordoned(Event, frozen=True, kw_only=True, tag="NodeUncordoned"):
    node_id: str


AnyEvent = (
    JobSubmitted
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
    | PlanComputed
    | NodeRegistered
    | NodeHealthChanged
    | NodeLost
    | NodeCordoned
    | NodeUncordoned
)

EVENT_TYPES: Final[tuple[type[Event], ...]] = (
    JobSubmitted,
    JobRejected,
    JobCancelRequested,
    JobCancelled,
    JobStarted,
    JobCheckpointed,
    JobExited,
    StopRequested,
    KillRequested,
    JobPreempted,
    JobRequeued,
    PlanComputed,
    NodeRegistered,
    NodeHealthChanged,
    NodeLost,
    NodeCordoned,
    NodeUncordoned,
)
