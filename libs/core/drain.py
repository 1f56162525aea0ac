"""Drains (R15): which jobs on a draining node are stopped, and when.

A drain comes in two modes (docs/adr/0020):

- graceful (``allot nodes cordon --drain``): a job that can resume is stopped once past
  its minimum runtime (it checkpoints in its grace period and runs on elsewhere); a job
  that cannot resume is left to finish on its own. Its declared ``max_runtime`` still
  ends it (the executor stops every job there, drain or not), and without one it runs
  to its end.
- now (``--drain --now``): every job is stopped once past its minimum runtime, so a job
  that cannot resume is lost. The minimum runtime is still honoured: it is the contract a
  funded job was admitted under (R13), and a drain, unlike a lost node, is a choice.

The node is recorded drained by the executor once it holds no job.
"""

import msgspec

from allot.core.model import JobRecord, State
from allot.core.preemption import protected, stoppable


def stops(job: JobRecord, immediate: bool) -> bool:
    """Whether a drain of this mode stops the job at all (once its protection ends)."""
    return immediate or job.spec.resumable


def draining(state: State, now: int) -> list[tuple[str, str]]:
    """(job id, node id) of jobs to stop now because their node is being drained, by job."""
    found = {}
    for node_id, node in sorted(i for i in state.nodes.items() if i[1].draining):
        for job_id in sorted(set(node.allocated.values())):
            job = state.jobs[job_id]
            if job_id not in found and stops(job, node.drain_now) and stoppable(job, now):
                found[job_id] = node_id
    return sorted(found.items())


class Fate(msgspec.Struct, frozen=True, kw_only=True):
    """What a drain of its node does to one job there."""

    job_id: str
    resumable: bool
    stopped_at: int | None  # when the drain stops it; None: it is left to finish
    ends_by: int | None  # when its declared max_runtime stops it, drain or not
    since: int  # stopped, it loses the work done since: its last checkpoint, or its start
    stopping: bool = False  # already being stopped or cancelled, whatever the drain does


def fates(state: State, node_id: str, now: int, immediate: bool | None = None) -> list[Fate]:
    """The fate of every job on the node under a drain of mode ``immediate`` (None: the
    node's own drain), by job id. What ``draining`` will decide, told ahead of time."""
    node = state.nodes[node_id]
    mode = node.drain_now if immediate is None else immediate
    found = []
    for job_id in sorted(set(node.allocated.values())):
        job = state.jobs[job_id]
        started = job.started_at if job.started_at is not None else now
        stopped_at = None
        if stops(job, mode):
            stopped_at = now
            if protected(job, now):
                stopped_at = started + job.spec.min_runtime_ns
        runtime = job.spec.max_runtime_ns
        since = started
        if job.spec.resumable and job.last_checkpoint_at is not None:
            since = max(started, job.last_checkpoint_at)
        found.append(
            Fate(
                job_id=job_id,
                resumable=job.spec.resumable,
                stopped_at=stopped_at,
                ends_by=None if runtime is None else started + runtime,
                since=since,
                stopping=job.stop is not None or job.preemption is not None or job.cancel_requested,
            )
        )
    return found
