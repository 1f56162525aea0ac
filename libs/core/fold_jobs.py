"""Fold rules for jobs: submission to end, stops, preemptions, requeues."""

import msgspec

from allot.core import wellformed
from allot.core.accounts import ancestry
from allot.core.arrays import indices, task_id
from allot.core.entitlement import accrue, want
from allot.core.model import (
    HOLDERS,
    ArrayRecord,
    FoldRule,
    Ignore,
    JobRecord,
    JobStatus,
    State,
    UnbilledRun,
)
from allot.proto.codes import ARRAY_LIMIT
from allot.proto.events import (
    ArraySubmitted,
    Event,
    GraceTooShort,
    JobCancelled,
    JobCancelRequested,
    JobCheckpointed,
    JobExited,
    JobPreempted,
    JobRejected,
    JobRequeued,
    JobsSubmitted,
    JobStarted,
    JobSubmitted,
    KillRequested,
    PendingReason,
    StopRequested,
)

_HOLDING = (JobStatus.ADMITTED, JobStatus.RUNNING)


def known_job(state: State, job_id: str) -> JobRecord:
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
    for node_id, gpus in job.placements.items():
        node = state.nodes.get(node_id)
        if node is None:
            continue
        for index in gpus:
            if node.allocated.get(index) == job.job_id:
                del node.allocated[index]
    amounts = state.holders.pop(job.job_id, None)
    if amounts is not None:
        for path in ancestry(job.spec.account):
            held = state.quota_used.get(path)
            if held is None:  # dropped at zero: a job holding nothing leaves nothing to take
                continue
            for resource, amount in amounts.items():
                held[resource] -= amount
            if not any(held.values()):
                del state.quota_used[path]


def end_job(state: State, job: JobRecord, status: JobStatus, at: int, reason: str) -> None:
    ending, held = not job.status.terminal, job.array_held
    if ending and not held:  # a stopped job has an end time, and is wanted still
        accrue(state, at)
        want(state, job.spec.account, -job.spec.total_gpus)
    job.array_held = False
    release(state, job, at)
    state.dequeue(job)
    state.holds.pop(job.job_id, None)
    state.stopped.pop(job.job_id, None)
    job.status = status
    job.ended_at = at
    job.end_reason = reason
    if ending and not held and job.array_id is not None:
        _release_task(state, state.arrays[job.array_id], at)


def _release_task(state: State, array: ArrayRecord, at: int) -> None:
    """One of the array's released tasks ended: the next of those held back, if any and
    the array is not being cancelled, joins the queue."""
    array.active -= 1
    tasks = array.tasks
    while array.released < len(tasks) and not array.cancel_requested:
        task = state.jobs[tasks[array.released]]
        array.released += 1
        if task.array_held:  # not cancelled while held
            task.array_held, task.reason, task.queued_at = False, None, at
            state.enqueue(task)
            want(state, task.spec.account, task.spec.total_gpus)
            array.active += 1
            return


def requeue(state: State, job: JobRecord, at: int, reason: str) -> None:
    release(state, job, at)
    job.status = JobStatus.PENDING
    job.placements, job.started_on, job.exited_on = {}, {}, {}
    job.admitted_at = job.started_at = None
    job.cancel_requested = False
    job.reason = None
    job.max_wait_exceeded = False
    job.queued_at = at
    job.preemption, job.stop, job.kill_requested = None, None, False
    job.stopped_in_ns = job.preempted_at = None
    state.stopped.pop(job.job_id, None)
    job.attempts += 1
    job.end_reason = reason
    state.enqueue(job)


# --- jobs -------------------------------------------------------------------------------


def _submitted(state: State, seq: int, e: JobSubmitted) -> None:
    if e.job_id in state.jobs or e.job_id in state.arrays:
        raise Ignore(f"job {e.job_id} already submitted")
    tasks = _task_ids(state, e) if isinstance(e, ArraySubmitted) else []
    accrue(state, e.meta.at)  # only once nothing can make the event ignored
    if not isinstance(e, ArraySubmitted):
        state.jobs[e.job_id] = JobRecord(
            job_id=e.job_id,
            spec=e.spec,
            status=JobStatus.PENDING,
            submitted_seq=seq,
            submitted_at=e.meta.at,
            queued_at=e.meta.at,
            idempotency_key=e.idempotency_key,
            submitted_by=e.by,
        )
        state.enqueue(state.jobs[e.job_id])
        want(state, e.spec.account, e.spec.total_gpus)
    else:
        _array_submitted(state, seq, e, tasks)
    if e.spec.account not in state.job_accounts:
        state.job_accounts[e.spec.account] = None
        state.fair_share_version += 1
    if e.idempotency_key is not None:
        state.idempotency[(e.by, e.spec.account, e.idempotency_key)] = e.job_id


def _batch_submitted(state: State, seq: int, e: JobsSubmitted) -> None:
    """Each submission as if appended alone at ``seq``: one that is malformed or does not
    fit the state is ignored by itself, as it would have been alone; the others fold. What
    is owed accrues once, up to the batch's time (stamped after its submissions'): the
    water-fill is computed once a batch, not once a submission."""
    accrue(state, e.meta.at)
    for entry in e.jobs:
        submitted = entry.event
        try:
            if problem := wellformed.problem(submitted):
                raise Ignore(f"malformed: {problem}")
            _submitted(state, seq, submitted)
        except Ignore as why:
            tag = str(type(submitted).__struct_config__.tag)
            state.note_ignored(seq, tag, f"{submitted.job_id[:200]} of a batch: {why}")


def _task_ids(state: State, e: ArraySubmitted) -> list[tuple[int, str]]:
    """The array's tasks as (index, job id); ignored whole if one of the ids is taken."""
    tasks = [(index, task_id(e.job_id, index)) for index in indices(e.array)]
    taken = next((t for _, t in tasks if t in state.jobs or t in state.arrays), None)
    if taken is not None:  # only a forged log names one: nothing of the array is folded
        raise Ignore(f"array {e.job_id}: its task {taken} is a job or an array already")
    return tasks


def _array_submitted(
    state: State, seq: int, e: ArraySubmitted, numbered: list[tuple[int, str]]
) -> None:
    """A task per index, each a job; past ``max_running``, held back outside the queue."""
    array = e.array
    tasks = [job_id for _, job_id in numbered]
    cap = len(tasks) if array.max_running is None else min(array.max_running, len(tasks))
    state.arrays[e.job_id] = ArrayRecord(
        array_id=e.job_id,
        spec=e.spec,
        array=array,
        tasks=tasks,
        submitted_seq=seq,
        submitted_at=e.meta.at,
        submitted_by=e.by,
        released=cap,
        active=cap,
    )
    held = PendingReason(
        job_id="", code=ARRAY_LIMIT, params={"array": e.job_id, "max_running": cap}
    )
    for n, (index, job_id) in enumerate(numbered):
        job = state.jobs[job_id] = JobRecord(
            job_id=job_id,
            spec=e.spec,
            status=JobStatus.PENDING,
            submitted_seq=seq,
            submitted_at=e.meta.at,
            queued_at=e.meta.at,
            submitted_by=e.by,
            array_id=e.job_id,
            array_index=index,
        )
        if n < cap:
            state.enqueue(job)
        else:
            job.array_held = True
            job.reason = msgspec.structs.replace(held, job_id=job_id)
    want(state, e.spec.account, e.spec.total_gpus * cap)


def _rejected(state: State, seq: int, e: JobRejected) -> None:
    job = known_job(state, e.job_id)
    if job.status != JobStatus.PENDING:
        raise Ignore(f"job {e.job_id} is {job.status}, only pending jobs can be rejected")
    end_job(state, job, JobStatus.REJECTED, e.meta.at, f"{e.field}: {e.message}")


def _cancel_requested(state: State, seq: int, e: JobCancelRequested) -> None:
    array = state.arrays.get(e.job_id)
    if array is not None:
        _cancel_array(state, array, e)
        return
    job = known_job(state, e.job_id)
    if job.status.terminal:
        raise Ignore(f"job {e.job_id} already {job.status}")
    _cancel(state, job, e)


def _cancel(state: State, job: JobRecord, e: JobCancelRequested) -> None:
    if job.status in (JobStatus.PENDING, JobStatus.PREEMPTED):
        end_job(state, job, JobStatus.CANCELLED, e.meta.at, e.reason or "cancelled while pending")
    else:
        job.cancel_requested = True  # its node agent stops it and reports the end


def _cancel_array(state: State, array: ArrayRecord, e: JobCancelRequested) -> None:
    """Every task of the array that has not ended; none is released any more."""
    if array.cancel_requested:
        raise Ignore(f"array {e.job_id} is already being cancelled")
    array.cancel_requested = True
    for job_id in array.tasks:
        job = state.jobs[job_id]
        if not job.status.terminal and not job.cancel_requested:
            _cancel(state, job, e)


def _attempt_on_node(
    state: State, job_id: str, node_id: str | None, attempt: int, statuses: tuple[JobStatus, ...]
) -> JobRecord:
    """The job, if a node's report is about its current attempt there; else ignore the
    report (a late one from an earlier attempt must not end the next)."""
    job = known_job(state, job_id)
    if job.status not in statuses or node_id not in job.placements or job.attempts != attempt:
        raise Ignore(
            f"job {job_id} is {job.status} on {','.join(job.placements) or '-'} in attempt "
            f"{job.attempts}; the report is from {node_id} about attempt {attempt}"
        )
    return job


def _cancelled(state: State, seq: int, e: JobCancelled) -> None:
    job = _attempt_on_node(state, e.job_id, e.node_id, e.attempt, (JobStatus.ADMITTED,))
    end_job(state, job, JobStatus.CANCELLED, e.meta.at, "cancelled before it started")


def _started(state: State, seq: int, e: JobStarted) -> None:
    job = _attempt_on_node(state, e.job_id, e.node_id, e.attempt, _HOLDING)
    if e.node_id in job.started_on:
        raise Ignore(f"job {e.job_id} already started on {e.node_id} in attempt {e.attempt}")
    job.started_on[e.node_id] = e.pid
    if len(job.started_on) == 1 or e.node_id == next(iter(job.placements)):
        job.output_path = e.output_path  # the lead node's output, once it started
    if job.status == JobStatus.RUNNING:
        return  # another node of a gang that is already running
    job.status = JobStatus.RUNNING
    job.started_at = e.meta.at
    state.unbilled[(job.job_id, job.attempts)] = UnbilledRun(
        account=job.spec.account,
        gpus=job.gpu_count,
        cpus=job.spec.cpus * job.spec.workers,
        memory_mib=job.spec.memory_mib * job.spec.workers,
        from_ns=e.meta.at,
    )


def _checkpointed(state: State, seq: int, e: JobCheckpointed) -> None:
    job = known_job(state, e.job_id)
    if not job.status.holds_gpus:
        raise Ignore(f"job {e.job_id} is {job.status}, not running")
    if e.step is not None and e.step <= job.checkpoint_step:
        raise Ignore(f"checkpoint {e.step} of {e.job_id} is not newer than {job.checkpoint_step}")
    job.last_checkpoint_at = e.meta.at
    job.checkpoint_step = e.step if e.step is not None else job.checkpoint_step + 1


def _exited(state: State, seq: int, e: JobExited) -> None:
    """One node's process of the job ended. A gang ends with its first failing process (its
    other nodes then kill theirs, as the job no longer holds their GPUs), or succeeds once
    every process has exited 0. A stopped job stops once every process has exited."""
    job = _attempt_on_node(state, e.job_id, e.node_id, e.attempt, _HOLDING)
    if e.node_id in job.exited_on:
        raise Ignore(f"job {e.job_id} already exited on {e.node_id} in attempt {e.attempt}")
    job.exited_on[e.node_id] = e.exit_code
    if e.stopped_in_ns is not None:
        job.stopped_in_ns = max(job.stopped_in_ns or 0, e.stopped_in_ns)
    if e.node_id == next(iter(job.placements)):
        job.output_path = e.output_path
    if job.stop is not None and not job.cancel_requested:
        if len(job.exited_on) < len(job.placements):
            return  # a stopped gang stops whole: wait for its other processes
        # Stopped, unless every process ended on its own, successfully, before the signal.
        if job.stopped_in_ns is not None or any(c != 0 for c in job.exited_on.values()):
            _stopped(state, job, e)
            return
    if e.exit_code == 0 and not job.cancel_requested and len(job.exited_on) < len(job.placements):
        return
    job.exit_code = e.exit_code
    if job.cancel_requested:
        end_job(state, job, JobStatus.CANCELLED, e.meta.at, "cancelled while running")
    elif e.exit_code == 0:
        end_job(state, job, JobStatus.SUCCEEDED, e.meta.at, e.reason or "exit 0")
    else:
        where = f" on {e.node_id}" if len(job.placements) > 1 else ""
        reason = (e.reason or f"exit {e.exit_code}") + where
        end_job(state, job, JobStatus.FAILED, e.meta.at, reason)


def _stopped(state: State, job: JobRecord, e: JobExited) -> None:
    """Every process of a stopped job has exited: past its max_runtime it has failed;
    preempted, it waits for the executor to account for it (``JobPreempted``)."""
    assert job.stop is not None
    job.exit_code = e.exit_code
    if job.stop.kind == "max_runtime":
        end_job(state, job, JobStatus.FAILED, e.meta.at, f"stopped: {job.stop.reason}")
        return
    release(state, job, e.meta.at)
    job.status = JobStatus.PREEMPTED
    job.ended_at = e.meta.at
    state.stopped[job.job_id] = None


def _stop_requested(state: State, seq: int, e: StopRequested) -> None:
    job = known_job(state, e.job_id)
    if not job.status.holds_gpus or job.attempts != e.attempt:
        raise Ignore(f"job {e.job_id} is {job.status} in attempt {job.attempts}, not stoppable")
    if job.stop is not None:
        raise Ignore(f"job {e.job_id} is already being stopped")
    job.stop = e


def _kill_requested(state: State, seq: int, e: KillRequested) -> None:
    job = known_job(state, e.job_id)
    if job.stop is None or not job.status.holds_gpus or job.attempts != e.attempt:
        raise Ignore(f"job {e.job_id} is {job.status} and not being stopped")
    if job.kill_requested:
        raise Ignore(f"job {e.job_id} is already being killed")
    job.kill_requested = True


def _preempted(state: State, seq: int, e: JobPreempted) -> None:
    job = known_job(state, e.job_id)
    if job.status != JobStatus.PREEMPTED or job.preempted_at is not None:
        raise Ignore(f"job {e.job_id} is {job.status}, not a stopped preemption")
    if job.attempts != e.attempt:
        raise Ignore(f"job {e.job_id} is in attempt {job.attempts}, not {e.attempt}")
    job.preempted_at = e.meta.at
    job.preemptions += 1
    job.lost_gpu_ms += e.lost_gpu_ms
    if not job.spec.resumable:
        end_job(state, job, JobStatus.LOST, job.ended_at or e.meta.at, "preempted; not resumable")


def _requeued(state: State, seq: int, e: JobRequeued) -> None:
    job = known_job(state, e.job_id)
    if job.status != JobStatus.PREEMPTED or job.preempted_at is None:
        raise Ignore(f"job {e.job_id} is {job.status}, only preempted jobs are requeued")
    requeue(state, job, e.meta.at, e.reason)


def _grace_too_short(state: State, seq: int, e: GraceTooShort) -> None:
    known_job(state, e.job_id).grace_too_short_ns = e.measured_ns


RULES: dict[type[Event], FoldRule] = {
    JobSubmitted: _submitted,
    ArraySubmitted: _submitted,
    JobsSubmitted: _batch_submitted,
    JobRejected: _rejected,
    JobCancelRequested: _cancel_requested,
    JobCancelled: _cancelled,
    JobStarted: _started,
    JobCheckpointed: _checkpointed,
    JobExited: _exited,
    StopRequested: _stop_requested,
    KillRequested: _kill_requested,
    GraceTooShort: _grace_too_short,
    JobPreempted: _preempted,
    JobRequeued: _requeued,
}

CHANGES: dict[type[Event], tuple[str, ...]] = {
    JobSubmitted: (),  # its rule: fair share, for an account new to the state
    ArraySubmitted: (),
    JobsSubmitted: (),
    JobRejected: (HOLDERS,),
    JobCancelRequested: (HOLDERS,),
    JobCancelled: (HOLDERS,),
    JobStarted: (HOLDERS,),
    JobCheckpointed: (HOLDERS,),
    JobExited: (HOLDERS,),
    StopRequested: (HOLDERS,),
    KillRequested: (HOLDERS,),
    GraceTooShort: (),
    JobPreempted: (HOLDERS,),
    JobRequeued: (HOLDERS,),
}
