"""Fold rules for jobs and plans: submission to end, admissions, requeues."""

from allot.core.model import (
    FoldRule,
    Ignore,
    JobRecord,
    JobStatus,
    State,
    UnbilledRun,
)
from allot.proto.events import (
    Admission,
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
    PlanComputed,
    StopRequested,
)

_HOLDING = (JobStatus.ADMITTED, JobStatus.RUNNING)


def _job(state: State, job_id: str) -> JobRecord:
    job = state.jobs.get(job_id)
    if job is None:
        raise Ignore(f"unknown job {job_id}")
    return job


def release(state: State, job: JobRecord, at: int) -> None:
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


def end_job(state: State, job: JobRecord, status: JobStatus, at: int, reason: str) -> None:
    release(state, job, at)
    state.pending.pop(job.job_id, None)
    job.status = status
    job.ended_at = at
    job.end_reason = reason


def requeue(state: State, job: JobRecord, at: int, reason: str) -> None:
    release(state, job, at)
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
        raise Ignore(f"job {e.job_id} already submitted")
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
        raise Ignore(f"job {e.job_id} is {job.status}, only pending jobs can be rejected")
    end_job(state, job, JobStatus.REJECTED, e.meta.at, f"{e.field}: {e.message}")


def _cancel_requested(state: State, seq: int, e: JobCancelRequested) -> None:
    job = _job(state, e.job_id)
    if job.status.terminal:
        raise Ignore(f"job {e.job_id} already {job.status}")
    if job.status in (JobStatus.PENDING, JobStatus.PREEMPTED):
        end_job(state, job, JobStatus.CANCELLED, e.meta.at, e.reason or "cancelled while pending")
    else:
        job.cancel_requested = True  # its node agent stops it and reports the end


def _attempt_on_node(
    state: State, job_id: str, node_id: str | None, attempt: int, statuses: tuple[JobStatus, ...]
) -> JobRecord:
    """The job, if a node's report is about its current attempt there; else ignore the
    report (a late one from an earlier attempt must not end the next)."""
    job = _job(state, job_id)
    if job.status not in statuses or job.node_id != node_id or job.attempts != attempt:
        raise Ignore(
            f"job {job_id} is {job.status} on {job.node_id} in attempt {job.attempts}; "
            f"the report is from {node_id} about attempt {attempt}"
        )
    return job


def _cancelled(state: State, seq: int, e: JobCancelled) -> None:
    job = _attempt_on_node(state, e.job_id, e.node_id, e.attempt, (JobStatus.ADMITTED,))
    end_job(state, job, JobStatus.CANCELLED, e.meta.at, "cancelled before it started")


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
        raise Ignore(f"job {e.job_id} is {job.status}, not running")
    job.last_checkpoint_at = e.meta.at


def _exited(state: State, seq: int, e: JobExited) -> None:
    job = _attempt_on_node(state, e.job_id, e.node_id, e.attempt, _HOLDING)
    job.exit_code = e.exit_code
    job.output_path = e.output_path
    if job.cancel_requested:
        end_job(state, job, JobStatus.CANCELLED, e.meta.at, "cancelled while running")
    elif e.exit_code == 0:
        end_job(state, job, JobStatus.SUCCEEDED, e.meta.at, e.reason or "exit 0")
    else:
        end_job(state, job, JobStatus.FAILED, e.meta.at, e.reason or f"exit {e.exit_code}")


def _stop_requested(state: State, seq: int, e: StopRequested | KillRequested) -> None:
    job = _job(state, e.job_id)
    if not job.status.holds_gpus:
        raise Ignore(f"job {e.job_id} is {job.status}, nothing to stop")


def _preempted(state: State, seq: int, e: JobPreempted) -> None:
    job = _job(state, e.job_id)
    if not job.status.holds_gpus:
        raise Ignore(f"job {e.job_id} is {job.status}, nothing to preempt")
    release(state, job, e.meta.at)
    job.status = JobStatus.PREEMPTED
    job.gpus = []


def _requeued(state: State, seq: int, e: JobRequeued) -> None:
    job = _job(state, e.job_id)
    if job.status != JobStatus.PREEMPTED:
        raise Ignore(f"job {e.job_id} is {job.status}, only preempted jobs are requeued")
    requeue(state, job, e.meta.at, e.reason)


# --- plans ------------------------------------------------------------------------------


def _plan(state: State, seq: int, e: PlanComputed) -> None:
    for admission in e.admissions:
        problem = _admission_problem(state, admission)
        if problem:
            state.note_ignored(seq, "PlanComputed.admission", f"{admission.job_id}: {problem}")
            continue
        job = state.jobs[admission.job_id]
        node = state.nodes[admission.node_id]
        for index in admission.gpus:
            node.allocated[index] = job.job_id
        job.status = JobStatus.ADMITTED
        job.node_id = node.node_id
        job.gpus = list(admission.gpus)
        job.admitted_at = e.now
        job.funded = admission.funded
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


RULES: dict[type[Event], FoldRule] = {
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
}
