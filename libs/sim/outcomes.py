"""Each job's outcome as a log tells it, kept up to date as the log is folded: what the
simulator's metrics (``allot.sim.metrics``) are computed from, for a cluster that runs.

A job holds GPUs for a run while the fold says it is running: from the record that made it
so (its first process started) to the one that ended it (its exit, its preemption, the loss
of its node). Times are the events' own, in seconds. A rejected job never waited.
"""

import msgspec

from allot.core import JobStatus, State
from allot.core.fold import LogRecord
from allot.proto.events import NodeEvent, job_events
from allot.sim.metrics import JobOutcome

S = 1e9


class Preempted(msgspec.Struct, kw_only=True):
    """Preemptions for one ground (``TIER``, ``FAIR``, ``DRAIN`` ...) and the work they lost."""

    count: int = 0
    lost_gpu_s: float = 0.0


class Outcomes:
    def __init__(self) -> None:
        self.jobs: dict[str, JobOutcome] = {}
        self.preempted: dict[str, Preempted] = {}  # ground -> what it cost
        self._running: dict[str, float] = {}  # job id -> when its current run began

    def note(self, state: State, record: LogRecord) -> None:
        """Take in ``record``, just folded into ``state``."""
        event = record.event
        if about := job_events(event):  # a job's, or the submissions of a batch
            touched = [e.job_id for e in about]
            # An array's tasks are jobs of their own, submitted with it.
            touched += [t for j in touched if j in state.arrays for t in state.arrays[j].tasks]
        elif isinstance(event, NodeEvent):
            touched = list(self._running)  # a node lost ends the runs on it
        else:
            return
        assert event is not None
        at = event.meta.at / S
        for job_id in touched:
            self._update(state, job_id, at)

    def _update(self, state: State, job_id: str, at: float) -> None:
        job = state.jobs.get(job_id)
        if job is None or job.status == JobStatus.REJECTED:
            self.jobs.pop(job_id, None)
            return
        outcome = self.jobs.get(job_id)
        if outcome is None:
            spec = job.spec
            outcome = self.jobs[job_id] = JobOutcome(
                job_id=job_id, account=spec.account, tier=spec.tier,
                gpus=spec.total_gpus, submit_s=job.submitted_at / S,
            )  # fmt: skip
        running = job.status == JobStatus.RUNNING
        if running and job_id not in self._running:
            self._running[job_id] = at
            if outcome.first_start_s is None:
                outcome.first_start_s = at
        elif not running and job_id in self._running:
            outcome.runs.append((self._running.pop(job_id), at))
        if job.preemptions > outcome.preemptions:  # as the fold took it: once, if at all
            # The plan's code for the preemption, kept by the fold until the requeue.
            ground = job.preemption.code if job.preemption is not None else "UNKNOWN"
            cost = self.preempted.setdefault(ground, Preempted())
            cost.count += job.preemptions - outcome.preemptions
            cost.lost_gpu_s += job.lost_gpu_ms / 1000 - outcome.lost_gpu_s
        outcome.preemptions = job.preemptions
        outcome.lost_gpu_s = job.lost_gpu_ms / 1000
        if job.status.terminal and outcome.end_s is None:
            outcome.end_s = at

    def at(self, now_s: float) -> list[JobOutcome]:
        """Every job's outcome as of ``now_s``: runs still going on end there for now."""
        outcomes = []
        for outcome in self.jobs.values():
            began = self._running.get(outcome.job_id)
            if began is not None:
                outcome = msgspec.structs.replace(outcome, runs=[*outcome.runs, (began, now_s)])
            outcomes.append(outcome)
        return outcomes
