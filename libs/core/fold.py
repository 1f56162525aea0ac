"""Folding events into state: ``apply(state, seq, event)``.

The fold never raises on an event that does not fit the state it meets (a start for an
unknown job, a duplicate, a stale admission): it records the event as ignored, with the
reason, and leaves the state as it was. Live services and replay therefore agree.
"""

from collections.abc import Callable
from typing import Any, Protocol

from allot.core.accounts import ancestry, parent_of
from allot.core.model import (
    HOUR_NS,
    AccountUsage,
    Budget,
    IgnoredEvent,
    JobRecord,
    JobStatus,
    NodeRecord,
    State,
    UnbilledRun,
)
from allot.proto.events import (
    AccountDefined,
    AccountRemoved,
    AccountUpdated,
    Admission,
    BudgetExhausted,
    BudgetGranted,
    Event,
    JobCancelled,
    JobCancelRequested,
    JobCheckpointed,
    JobExited,
    JobPreempted,
    JobRejected,
    JobRequeued,
    JobStarted,
    JobSubmitted,
    KillRequested,
    NodeCordoned,
    NodeHealthChanged,
    NodeLost,
    NodeRegistered,
    NodeUncordoned,
    PlanComputed,
    StopRequested,
    UsageCharged,
)

MAX_IGNORED_KEPT = 1000
_HOLDING = (JobStatus.ADMITTED, JobStatus.RUNNING)


class _Ignore(Exception):
    """Raised inside a handler when the event does not apply; caught by ``apply``."""


def apply(state: State, seq: int, event: Event) -> State:
    """Fold one event at stream sequence ``seq`` into ``state`` (in place) and return it."""
    if seq <= state.seq:
        _ignore(state, seq, _tag(event), f"sequence {seq} already folded (at {state.seq})")
        return state
    handler = _HANDLERS.get(type(event))
    try:
        if handler is None:
            raise _Ignore("no fold rule for this event type")
        handler(state, seq, event)
    except _Ignore as why:
        _ignore(state, seq, _tag(event), str(why))
    state.seq = seq
    return state


class LogRecord(Protocol):
    """What ``apply_record`` needs of a message read from the log."""

    @property
    def seq(self) -> int: ...
    @property
    def type(self) -> str: ...
    @property
    def event(self) -> Event | None: ...
    @property
    def error(self) -> str: ...


def apply_record(state: State, record: LogRecord) -> State:
    """Fold a record of the log; one that could not be decoded (e.g. an event type from a
    newer schema) is recorded as ignored, with the decoder's reason."""
    if record.event is not None:
        return apply(state, record.seq, record.event)
    if record.seq > state.seq:
        _ignore(state, record.seq, record.type, record.error)
        if record.type == _tag_of(PlanComputed):
            # Unreadable, but a plan all the same: the next plan must follow it.
            state.last_plan_seq = record.seq
        state.seq = record.seq
    return state


def _tag(event: Event) -> str:
    return _tag_of(type(event))


def _tag_of(event_type: type[Event]) -> str:
    return str(event_type.__struct_config__.tag)


def _ignore(state: State, seq: int, type_name: str, reason: str) -> None:
    state.ignored.append(IgnoredEvent(seq=seq, type=type_name, reason=reason))
    state.ignored_count += 1
    if len(state.ignored) > MAX_IGNORED_KEPT:
        del state.ignored[: len(state.ignored) - MAX_IGNORED_KEPT]


def _job(state: State, job_id: str) -> JobRecord:
    job = state.jobs.get(job_id)
    if job is None:
        raise _Ignore(f"unknown job {job_id}")
    return job


def _node(state: State, node_id: str) -> NodeRecord:
    node = state.nodes.get(node_id)
    if node is None:
        raise _Ignore(f"unknown node {node_id}")
    return node


def _release(state: State, job: JobRecord, at: int) -> None:
    """Give back the GPUs a job holds; its GPU time stops counting at ``at``."""
    run = state.unbilled.get((job.job_id, job.attempts))
    if run is not None and run.until_ns is None:
        run.until_ns = max(at, run.from_ns)
        if run.until_ns == run.from_ns:
            del state.unbilled[(job.job_id, job.attempts)]
    node = state.nodes.get(job.node_id) if job.node_id else None
    if node is not None:
        for index in job.gpus:
            if node.allocated.get(index) == job.job_id:
                del node.allocated[index]


def _end(state: State, job: JobRecord, status: JobStatus, at: int, reason: str) -> None:
    _release(state, job, at)
    state.pending.pop(job.job_id, None)
    job.status = status
    job.ended_at = at
    job.end_reason = reason


def _requeue(state: State, job: JobRecord, at: int, reason: str) -> None:
    _release(state, job, at)
    job.status = JobStatus.PENDING
    job.node_id = None
    job.gpus = []
    job.pid = None
    job.admitted_at = job.started_at = None
    job.cancel_requested = False
    job.reason = None
    job.attempts += 1
    job.end_reason = reason
    state.pending[job.job_id] = None


# --- jobs -------------------------------------------------------------------------------


def _submitted(state: State, seq: int, e: JobSubmitted) -> None:
    if e.job_id in state.jobs:
        raise _Ignore(f"job {e.job_id} already submitted")
    state.jobs[e.job_id] = JobRecord(
        job_id=e.job_id,
        spec=e.spec,
        status=JobStatus.PENDING,
        submitted_seq=seq,
        submitted_at=e.meta.at,
        idempotency_key=e.idempotency_key,
    )
    state.pending[e.job_id] = None
    if e.spec.account not in state.job_accounts:
        state.job_accounts[e.spec.account] = None
        state.fair_share_version += 1
    if e.idempotency_key is not None:
        state.idempotency[(e.spec.account, e.idempotency_key)] = e.job_id


def _rejected(state: State, seq: int, e: JobRejected) -> None:
    job = _job(state, e.job_id)
    if job.status != JobStatus.PENDING:
        raise _Ignore(f"job {e.job_id} is {job.status}, only pending jobs can be rejected")
    _end(state, job, JobStatus.REJECTED, e.meta.at, f"{e.field}: {e.message}")


def _cancel_requested(state: State, seq: int, e: JobCancelRequested) -> None:
    job = _job(state, e.job_id)
    if job.status.terminal:
        raise _Ignore(f"job {e.job_id} already {job.status}")
    if job.status in (JobStatus.PENDING, JobStatus.PREEMPTED):
        _end(state, job, JobStatus.CANCELLED, e.meta.at, e.reason or "cancelled while pending")
    else:
        job.cancel_requested = True  # its node agent stops it and reports the end


def _attempt_on_node(
    state: State, job_id: str, node_id: str | None, attempt: int, statuses: tuple[JobStatus, ...]
) -> JobRecord:
    """The job, if a node's report is about its current attempt there; else ignore the
    report (a late one from an earlier attempt must not end the next)."""
    job = _job(state, job_id)
    if job.status not in statuses or job.node_id != node_id or job.attempts != attempt:
        raise _Ignore(
            f"job {job_id} is {job.status} on {job.node_id} in attempt {job.attempts}; "
            f"the report is from {node_id} about attempt {attempt}"
        )
    return job


def _cancelled(state: State, seq: int, e: JobCancelled) -> None:
    job = _attempt_on_node(state, e.job_id, e.node_id, e.attempt, (JobStatus.ADMITTED,))
    _end(state, job, JobStatus.CANCELLED, e.meta.at, "cancelled before it started")


def _started(state: State, seq: int, e: JobStarted) -> None:
    job = _attempt_on_node(state, e.job_id, e.node_id, e.attempt, (JobStatus.ADMITTED,))
    job.status = JobStatus.RUNNING
    job.started_at = e.meta.at
    job.pid = e.pid
    state.unbilled[(job.job_id, job.attempts)] = UnbilledRun(
        account=job.spec.account,
        gpus=len(job.gpus),
        cpus=job.spec.cpus,
        memory_mib=job.spec.memory_mib,
        from_ns=e.meta.at,
    )
    job.output_path = e.output_path


def _checkpointed(state: State, seq: int, e: JobCheckpointed) -> None:
    job = _job(state, e.job_id)
    if job.status != JobStatus.RUNNING:
        raise _Ignore(f"job {e.job_id} is {job.status}, not running")
    job.last_checkpoint_at = e.meta.at


def _exited(state: State, seq: int, e: JobExited) -> None:
    job = _attempt_on_node(state, e.job_id, e.node_id, e.attempt, _HOLDING)
    job.exit_code = e.exit_code
    job.output_path = e.output_path
    if job.cancel_requested:
        _end(state, job, JobStatus.CANCELLED, e.meta.at, "cancelled while running")
    elif e.exit_code == 0:
        _end(state, job, JobStatus.SUCCEEDED, e.meta.at, e.reason or "exit 0")
    else:
        _end(state, job, JobStatus.FAILED, e.meta.at, e.reason or f"exit {e.exit_code}")


def _stop_requested(state: State, seq: int, e: StopRequested | KillRequested) -> None:
    job = _job(state, e.job_id)
    if not job.status.holds_gpus:
        raise _Ignore(f"job {e.job_id} is {job.status}, nothing to stop")


def _preempted(state: State, seq: int, e: JobPreempted) -> None:
    job = _job(state, e.job_id)
    if not job.status.holds_gpus:
        raise _Ignore(f"job {e.job_id} is {job.status}, nothing to preempt")
    _release(state, job, e.meta.at)
    job.status = JobStatus.PREEMPTED
    job.gpus = []


def _requeued(state: State, seq: int, e: JobRequeued) -> None:
    job = _job(state, e.job_id)
    if job.status != JobStatus.PREEMPTED:
        raise _Ignore(f"job {e.job_id} is {job.status}, only preempted jobs are requeued")
    _requeue(state, job, e.meta.at, e.reason)


# --- plans ------------------------------------------------------------------------------


def _plan(state: State, seq: int, e: PlanComputed) -> None:
    for admission in e.admissions:
        problem = _admission_problem(state, admission)
        if problem:
            _ignore(state, seq, "PlanComputed.admission", f"{admission.job_id}: {problem}")
            continue
        job = state.jobs[admission.job_id]
        node = state.nodes[admission.node_id]
        for index in admission.gpus:
            node.allocated[index] = job.job_id
        job.status = JobStatus.ADMITTED
        job.node_id = node.node_id
        job.gpus = list(admission.gpus)
        job.admitted_at = e.now
        job.reason = None
        del state.pending[job.job_id]
    for reason in e.pending:
        waiting = state.jobs.get(reason.job_id)
        if waiting is not None and waiting.status == JobStatus.PENDING:
            waiting.reason = reason
    state.last_plan_seq = seq


def _admission_problem(state: State, a: Admission) -> str:
    job = state.jobs.get(a.job_id)
    node = state.nodes.get(a.node_id)
    if job is None or job.status != JobStatus.PENDING:
        return "job is not pending"
    if node is None or not node.schedulable:
        return f"node {a.node_id} is not schedulable"
    if len(a.gpus) != job.spec.gpus or len(set(a.gpus)) != len(a.gpus):
        return f"{len(a.gpus)} distinct GPUs needed {job.spec.gpus}"
    indices = {g.index for g in node.gpus}
    if any(i not in indices or i in node.allocated for i in a.gpus):
        return f"GPUs {a.gpus} not free on {a.node_id}"
    return ""


# --- nodes ------------------------------------------------------------------------------


def _registered(state: State, seq: int, e: NodeRegistered) -> None:
    node = state.nodes.get(e.node_id)
    if node is None:
        state.nodes[e.node_id] = NodeRecord(
            node_id=e.node_id,
            hostname=e.hostname,
            gpus=list(e.gpus),
            registered_at=e.meta.at,
            cpus=e.cpus,
            memory_mib=e.memory_mib,
        )
        return
    # A restarted agent: the node is back; what its jobs hold stays held until they end.
    # Health is not reset: only a health transition changes it.
    node.hostname = e.hostname
    node.gpus = list(e.gpus)
    node.cpus, node.memory_mib = e.cpus, e.memory_mib
    node.registered_at = e.meta.at
    node.lost = False


def _health(state: State, seq: int, e: NodeHealthChanged) -> None:
    _node(state, e.node_id).healthy = e.healthy


def _lost(state: State, seq: int, e: NodeLost) -> None:
    node = _node(state, e.node_id)
    if node.lost:
        raise _Ignore(f"node {e.node_id} already lost")
    node.lost = True
    holders = sorted(set(node.allocated.values()))
    # Its jobs are known to have run only until the node was last heard from.
    for job_id in holders:
        job = state.jobs[job_id]
        heard_of = max(e.last_seen_ns, job.started_at or 0)
        if job.spec.resumable and not job.cancel_requested:
            _requeue(state, job, heard_of, f"node {e.node_id} lost")
        else:
            _end(state, job, JobStatus.LOST, heard_of, f"node {e.node_id} lost")


def _cordoned(state: State, seq: int, e: NodeCordoned) -> None:
    _node(state, e.node_id).cordoned = True


def _uncordoned(state: State, seq: int, e: NodeUncordoned) -> None:
    _node(state, e.node_id).cordoned = False


# --- accounts -----------------------------------------------------------------------------


def _account_defined(state: State, seq: int, e: AccountDefined | AccountUpdated) -> None:
    exists = e.path in state.accounts
    if isinstance(e, AccountDefined) and exists:
        raise _Ignore(f"account {e.path} already defined")
    if isinstance(e, AccountUpdated) and not exists:
        raise _Ignore(f"unknown account {e.path}")
    parent = parent_of(e.path)
    if parent is not None and parent not in state.accounts:
        raise _Ignore(f"parent account {parent} is not defined")
    state.accounts[e.path] = e.settings
    state.fair_share_version += 1


def _account_removed(state: State, seq: int, e: AccountRemoved) -> None:
    if e.path not in state.accounts:
        raise _Ignore(f"unknown account {e.path}")
    if any(p.startswith(e.path + "/") for p in state.accounts):
        raise _Ignore(f"account {e.path} still has child accounts")
    del state.accounts[e.path]
    state.fair_share_version += 1


def _charged(state: State, seq: int, e: UsageCharged) -> None:
    key = (e.job_id, e.attempt)
    run = state.unbilled.get(key)
    if run is None or run.from_ns != e.from_ns:
        raise _Ignore(f"{e.job_id} attempt {e.attempt} is not unbilled from {e.from_ns}")
    if run.account != e.path or e.gpu_ms < 0 or e.to_ns <= e.from_ns:
        raise _Ignore(f"charge for {e.job_id} does not match its run")
    if run.until_ns is not None and e.to_ns > run.until_ns:
        raise _Ignore(f"charge for {e.job_id} runs past the end of its attempt")
    run.from_ns = e.to_ns
    if run.until_ns is not None and run.from_ns >= run.until_ns:
        del state.unbilled[key]
    state.fair_share_version += 1
    by_hour = split(e.from_ns, e.to_ns, e.gpu_ms, 0, HOUR_NS)
    for account in ancestry(e.path):
        usage = state.usage.setdefault(account, AccountUsage())
        usage.total_gpu_ms += e.gpu_ms
        for hour, amount in by_hour:
            usage.by_hour[hour] = usage.by_hour.get(hour, 0) + amount
        budget = state.budgets.get(account)
        if budget is not None:
            for period, amount in split(
                e.from_ns, e.to_ns, e.gpu_ms, budget.starts_at, budget.period_ns
            ):
                if period >= 0:
                    budget.used[period] = budget.used.get(period, 0) + amount


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


def _granted(state: State, seq: int, e: BudgetGranted) -> None:
    if e.gpu_ms < 0 or e.period_ns <= 0:
        raise _Ignore(f"budget for {e.path} is not a positive amount per period")
    # What the account used in the period the new grant starts in still counts against it:
    # granting again does not refill a budget.
    earlier = state.budgets.get(e.path)
    period = None if earlier is None else earlier.period_at(e.starts_at)
    used = {} if earlier is None or period is None else {0: earlier.used.get(period, 0)}
    state.budgets[e.path] = Budget(
        gpu_ms=e.gpu_ms, period_ns=e.period_ns, starts_at=e.starts_at, used=used
    )


def _exhausted(state: State, seq: int, e: BudgetExhausted) -> None:
    budget = state.budgets.get(e.path)
    if budget is None:
        raise _Ignore(f"account {e.path} has no budget")
    budget.exhausted[e.period] = None


_HANDLERS: dict[type[Event], Callable[[State, int, Any], None]] = {
    JobSubmitted: _submitted,
    JobRejected: _rejected,
    JobCancelRequested: _cancel_requested,
    JobCancelled: _cancelled,
    JobStarted: _started,
    JobCheckpointed: _checkpointed,
    JobExited: _exited,
    StopRequested: _stop_requested,
    KillRequested: _stop_requested,
    JobPreempted: _preempted,
    JobRequeued: _requeued,
    PlanComputed: _plan,
    NodeRegistered: _registered,
    NodeHealthChanged: _health,
    NodeLost: _lost,
    NodeCordoned: _cordoned,
    NodeUncordoned: _uncordoned,
    AccountDefined: _account_defined,
    AccountUpdated: _account_defined,
    AccountRemoved: _account_removed,
    UsageCharged: _charged,
    BudgetGranted: _granted,
    BudgetExhausted: _exhausted,
}
