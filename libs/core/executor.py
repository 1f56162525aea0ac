"""What the preemptor service must do now: the pure half of executing preemptions.

From the folded log and the time, in this order of a job's life:

1. a running job a plan chose to preempt, or one past its declared ``max_runtime``, gets
   ``StopRequested`` with its grace period (SIGTERM on its nodes);
2. a job still running when its grace period is over gets ``KillRequested`` (SIGKILL);
3. a preempted job whose processes have all exited has its loss settled: ``JobPreempted`` with
   the GPU time it lost since its last checkpoint (``GraceTooShort`` first when it had to
   be killed); a job that cannot resume has lost all its work and ends;
4. a settled job that can resume gets ``JobRequeued``;
5. a draining node that holds no more jobs gets ``NodeDrained``.

Each action names the attempt (or drain) it is for, so the service can give every event a
message id: redelivery, a retry or a restarted preemptor never does anything twice.
"""

import msgspec

from allot.core.model import JobRecord, State
from allot.proto.codes import DRAIN
from allot.proto.events import StopKind


class Stop(msgspec.Struct, frozen=True, kw_only=True):
    job_id: str
    attempt: int
    grace_ns: int
    reason: str
    kind: StopKind


class Kill(msgspec.Struct, frozen=True, kw_only=True):
    job_id: str
    attempt: int


class SettleLoss(msgspec.Struct, frozen=True, kw_only=True):
    """Record what a stopped job's stop cost it (``JobPreempted``)."""

    job_id: str
    attempt: int
    lost_gpu_ms: int
    checkpoint_age_ns: int | None
    grace_used_ns: int
    grace_too_short_ns: int | None  # measured stop time, when the job had to be killed
    grace_ns: int


class Requeue(msgspec.Struct, frozen=True, kw_only=True):
    job_id: str
    attempt: int


class Drained(msgspec.Struct, frozen=True, kw_only=True):
    node_id: str
    drain: int


Action = Stop | Kill | SettleLoss | Requeue | Drained


def due(state: State, now: int) -> list[Action]:
    actions: list[Action] = []
    holders = sorted(state.holders)
    for job_id in holders:
        job = state.jobs[job_id]
        if job.stop is None:
            stop = _stop_due(job, now)
            if stop is not None:
                actions.append(stop)
        elif not job.kill_requested and now - job.stop.meta.at >= job.stop.grace_ns:
            actions.append(Kill(job_id=job_id, attempt=job.attempts))
    for job_id in sorted(state.stopped):
        job = state.jobs[job_id]
        if job.preempted_at is None:
            actions.append(_settle(job))
        elif job.spec.resumable:  # accounted for, and not yet requeued
            actions.append(Requeue(job_id=job_id, attempt=job.attempts))
    for node_id, node in sorted(state.nodes.items()):
        if node.draining and not node.drained and not node.allocated:
            actions.append(Drained(node_id=node_id, drain=node.drains))
    return actions


def _stop_due(job: JobRecord, now: int) -> Stop | None:
    if job.cancel_requested:
        return None  # its agent is stopping it already
    spec = job.spec
    if job.preemption is not None:
        reason = f"{job.preemption.code} for {job.preemption.params.get('for', '-')}"
        if job.preemption.code == DRAIN:
            reason = f"DRAIN of {job.preemption.params.get('node', '-')}"
        return Stop(
            job_id=job.job_id, attempt=job.attempts, grace_ns=spec.grace_ns, reason=reason,
            kind="preempt",
        )  # fmt: skip
    runtime = spec.max_runtime_ns
    if runtime is not None and job.started_at is not None and now - job.started_at >= runtime:
        return Stop(
            job_id=job.job_id, attempt=job.attempts, grace_ns=spec.grace_ns,
            reason=f"max_runtime of {runtime // 10**9}s reached", kind="max_runtime",
        )  # fmt: skip
    return None


def _settle(job: JobRecord) -> SettleLoss:
    """What a stop cost: GPU time since the last checkpoint (or since the start, for a job
    that cannot resume), in milliseconds."""
    assert job.stop is not None
    assert job.ended_at is not None
    ended = job.ended_at
    began = job.started_at if job.started_at is not None else ended
    checkpoint = job.last_checkpoint_at if job.spec.resumable else None
    since = max(began, checkpoint) if checkpoint is not None else began
    grace_used = max(0, ended - job.stop.meta.at)
    measured = job.stopped_in_ns if job.stopped_in_ns is not None else grace_used
    return SettleLoss(
        job_id=job.job_id,
        attempt=job.attempts,
        lost_gpu_ms=sum(len(g) for g in job.placements.values()) * max(0, ended - since) // 10**6,
        checkpoint_age_ns=None if checkpoint is None else max(0, ended - checkpoint),
        grace_used_ns=grace_used,
        grace_too_short_ns=max(measured, job.stop.grace_ns) if job.kill_requested else None,
        grace_ns=job.stop.grace_ns,
    )
