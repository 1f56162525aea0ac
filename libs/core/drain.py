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

from allot.core.model import JobRecord, NodeRecord, State
from allot.core.preemption import stoppable


def stops(job: JobRecord, immediate: bool) -> bool:
    """Whether a drain of this mode stops the job at all (once its protection ends)."""
    return immediate or job.spec.resumable


def draining(state: State, now: int) -> list[tuple[str, str]]:
    """(job id, node id) of jobs to stop now because their node is being drained, by job."""
    found = {}
    # Nodes in the order the log registered them: a job on two draining nodes names the
    # first, whatever they are called.
    draining = sorted((n for n in state.nodes.items() if n[1].draining), key=_registration)
    for node_id, node in draining:
        for job_id in sorted(set(node.allocated.values())):
            job = state.jobs[job_id]
            if job_id not in found and stops(job, node.drain_now) and stoppable(job, now):
                found[job_id] = node_id
    return sorted(found.items())


def _registration(item: tuple[str, NodeRecord]) -> int:
    return item[1].registered_seq


class Fate(msgspec.Struct, frozen=True, kw_only=True):
    """What a drain of its node does to one job there."""

    job_id: str
    resumable: bool
    stopped: bool  # the drain stops it (not before ``not_before``); else it is left to finish
    not_before: int | None  # when its minimum runtime ends, where its funding protects it
    ends_by: int | None  # when its declared max_runtime stops it, drain or not
    since: int | None  # stopped, it loses the work done since: its last checkpoint, or start
    checkpointed: bool = False  # ``since`` is a checkpoint it can resume from
    stopping: bool = False  # already being stopped or cancelled, whatever the drain does


def fates(state: State, node_id: str, immediate: bool | None = None) -> list[Fate]:
    """The fate of every job on the node under a drain of mode ``immediate`` (None: the
    node's own drain), by job id: what ``draining`` will decide, told ahead of time."""
    node = state.nodes[node_id]
    mode = node.drain_now if immediate is None else immediate
    found = []
    for job_id in sorted(set(node.allocated.values())):
        job = state.jobs[job_id]
        started, spec = job.started_at, job.spec
        since: int | None = started
        not_before: int | None = None
        ends_by: int | None = None
        if started is not None:  # an admitted job not started yet has lost nothing
            if spec.resumable and job.last_checkpoint_at is not None:
                since = max(started, job.last_checkpoint_at)
            if job.funded and spec.min_runtime_ns:
                not_before = started + spec.min_runtime_ns
            if spec.max_runtime_ns is not None:
                ends_by = started + spec.max_runtime_ns
        stopping = job.stop is not None or job.preemption is not None or job.cancel_requested
        found.append(
            Fate(
                job_id=job_id, resumable=spec.resumable, stopped=stops(job, mode),
                not_before=not_before, ends_by=ends_by, since=since, stopping=stopping,
                checkpointed=since != started,
            )
        )  # fmt: skip
    return found
