"""One job's whole story from the log: every plan that considered it and why it waited
(each reason a span of time, until the next one), where and why it was admitted, its
starts and exits, each preemption with its cost, each requeue, and how it ended."""

from collections.abc import Collection

import msgspec

from allot.core.fold import LogRecord, apply_record
from allot.core.model import JobRecord, State
from allot.proto.events import (
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
    MaxWaitExceeded,
    PendingReason,
    PlanComputed,
    StopRequested,
    submissions,
)


class Step(msgspec.Struct, frozen=True, kw_only=True):
    at: int  # UTC ns
    seq: int
    what: str  # a stable word: submitted, waiting, admitted, started, preempting, ...
    text: str
    until: int | None = None  # for a waiting span: when the next step began


def trail(records: Collection[LogRecord], job_id: str) -> list[Step]:
    """The steps, as the fold took them: a decision the fold ignored is no step."""
    trails = Trails(job_id)
    state = State()
    for record in records:
        trails.fold(state, record, records)
    return trails.of(job_id)


class Trails:
    """Every job's trail (or one job's), kept while folding: a reader that folds the log
    once answers any job's story without reading the log again."""

    def __init__(self, only: str | None = None):
        self.only = only
        self._steps: dict[str, list[Step]] = {}
        self._checkpoints: dict[str, int] = {}

    def of(
        self, job_id: str, array_id: str | None = None, ended_at: int | None = None
    ) -> list[Step]:
        """The job's steps; a reason holds until whatever came next. A task of a job array
        (``array_id``) has the array's steps too, those up to its end (``ended_at``, if it
        ended): its submission, a cancel of all."""
        steps = self._steps.get(job_id, [])
        if array_id is not None:
            shared = self._steps.get(array_id, [])
            if ended_at is not None:
                shared = [step for step in shared if step.at <= ended_at]
            steps = sorted(shared + steps, key=_seq)
        return [
            msgspec.structs.replace(step, until=steps[n + 1].at)
            if step.what == "waiting" and n + 1 < len(steps)
            else step
            for n, step in enumerate(steps)
        ]

    def fold(
        self, state: State, record: LogRecord, records: Collection[LogRecord] | None = None
    ) -> None:
        """Fold ``record`` into ``state`` (``apply_record``) and note the steps it makes."""
        event = record.event
        if isinstance(event, PlanComputed):
            self._fold_plan(state, record, event, records)
            return
        ignored = state.ignored_count
        apply_record(state, record, records)
        if isinstance(event, JobsSubmitted):  # of a batch, the submissions that folded
            for submitted in submissions(event):
                taken = state.jobs.get(submitted.job_id) or state.arrays.get(submitted.job_id)
                if taken is not None and taken.submitted_seq == record.seq:
                    self._step(record.seq, submitted)
            return
        if event is not None and state.ignored_count == ignored:
            self._step(record.seq, event)

    def _step(self, seq: int, event: Event) -> None:
        """Note the step a folded event makes in its job's trail."""
        job_id = getattr(event, "job_id", None)
        if not isinstance(job_id, str) or (self.only is not None and job_id != self.only):
            return
        steps = self._steps.setdefault(job_id, [])
        if isinstance(event, JobCheckpointed):
            self._checkpoints[job_id] = self._checkpoints.get(job_id, 0) + 1
            if steps and steps[-1].what == "checkpointed":
                steps.pop()  # a run of checkpoints reads as its latest
        step = _from_job_event(seq, event, self._checkpoints.get(job_id, 0))
        if step is not None:
            steps.append(step)

    def _fold_plan(
        self,
        state: State,
        record: LogRecord,
        plan: PlanComputed,
        records: Collection[LogRecord] | None,
    ) -> None:
        named = {d.job_id for d in plan.pending} | {d.job_id for d in plan.admissions}
        named |= {d.job_id for d in plan.preemptions} | {hold.job_id for hold in plan.holds}
        if self.only is not None:
            named &= {self.only}
        was_pending = {job_id for job_id in named if job_id in state.pending}
        # A job already chosen to stop is not chosen again: the fold ignores that.
        unchosen = {j for j in named if j in state.jobs and state.jobs[j].preemption is None}
        apply_record(state, record, records)
        for job_id in sorted(named):
            job = state.jobs.get(job_id)
            if job is None:
                continue
            pending = job_id in was_pending
            admitted = pending and job_id not in state.pending
            chosen = job_id in unchosen and job.preemption is not None
            made = _from_plan(record.seq, plan, job, pending, admitted, chosen)
            if made:
                self._steps.setdefault(job_id, []).extend(made)


def _from_plan(
    seq: int,
    plan: PlanComputed,
    job: JobRecord | None,
    was_pending: bool,
    admitted: bool,
    chosen: bool,
) -> list[Step]:
    """What this plan, as the fold took it, decided about the job."""
    steps: list[Step] = []
    if job is None:
        return steps
    job_id = job.job_id
    for reason in plan.pending:
        if reason.job_id == job_id and was_pending:
            steps.append(Step(at=plan.now, seq=seq, what="waiting", text=_reason(reason)))
    for admission in plan.admissions:
        if admission.job_id == job_id and admitted:
            where = " ".join(
                f"{p.node_id}[{','.join(map(str, p.gpus))}]" for p in admission.placements
            )
            funded = "funded" if admission.funded else "unfunded"
            steps.append(Step(at=plan.now, seq=seq, what="admitted", text=f"to {where}, {funded}"))
    if chosen and job.preemption is not None:
        text = f"chosen to stop: {_reason(job.preemption)}"
        steps.append(Step(at=plan.now, seq=seq, what="preempting", text=text))
    for hold in plan.holds:
        if hold.job_id == job_id and hold.placements and was_pending:
            text = "GPUs held for it while the jobs stopped for it end"
            steps.append(Step(at=plan.now, seq=seq, what="held", text=text))
    return steps


def _seq(step: Step) -> int:
    return step.seq


def _reason(reason: PendingReason | object) -> str:
    code = getattr(reason, "code", "")
    params = getattr(reason, "params", {})
    inside = ", ".join(f"{k} {v}" for k, v in sorted(params.items()))
    return f"{code}({inside})" if inside else code


def _from_job_event(seq: int, e: Event, checkpoints: int) -> Step | None:
    at = e.meta.at
    if isinstance(e, JobSubmitted):
        spec = e.spec
        shape = f"{spec.workers}x{spec.gpus}" if spec.workers > 1 else str(spec.gpus)
        text = f"{shape} GPUs, {spec.tier}, account {spec.account}"
        return Step(at=at, seq=seq, what="submitted", text=text)
    if isinstance(e, JobStarted):
        return Step(at=at, seq=seq, what="started", text=f"attempt {e.attempt} on {e.node_id}")
    if isinstance(e, JobCheckpointed):
        return Step(
            at=at, seq=seq, what="checkpointed", text=f"checkpoint {e.step} ({checkpoints} seen)"
        )
    if isinstance(e, StopRequested):
        text = f"{e.kind}: {e.reason}, grace {e.grace_ns / 1e9:g}s"
        return Step(at=at, seq=seq, what="stop requested", text=text)
    if isinstance(e, KillRequested):
        return Step(at=at, seq=seq, what="killed", text=e.reason)
    if isinstance(e, GraceTooShort):
        text = f"needed {e.measured_ns / 1e9:.1f}s, its grace is {e.grace_ns / 1e9:g}s"
        return Step(at=at, seq=seq, what="grace too short", text=text)
    if isinstance(e, JobExited):
        text = f"attempt {e.attempt} on {e.node_id}: exit {e.exit_code}" + (
            f" ({e.reason})" if e.reason else ""
        )
        return Step(at=at, seq=seq, what="exited", text=text)
    if isinstance(e, JobPreempted):
        age = (
            "no checkpoint"
            if e.checkpoint_age_ns is None
            else f"checkpoint {e.checkpoint_age_ns / 1e9:.1f}s old"
        )
        stopped = e.grace_used_ns / 1e9
        text = f"lost {e.lost_gpu_ms / 1000:.1f} GPU-s ({age}), stopped in {stopped:.1f}s"
        return Step(at=at, seq=seq, what="preempted", text=text)
    if isinstance(e, JobRequeued):
        return Step(at=at, seq=seq, what="requeued", text=e.reason)
    if isinstance(e, MaxWaitExceeded):
        target = e.max_wait_ns / 1e9
        text = f"waited {e.waited_ns / 1e9:.0f}s, past {e.account}'s target of {target:.0f}s"
        return Step(at=at, seq=seq, what="waited too long", text=text)
    if isinstance(e, JobCancelRequested):
        return Step(at=at, seq=seq, what="cancel requested", text=e.reason or "-")
    if isinstance(e, JobCancelled):
        return Step(at=at, seq=seq, what="cancelled", text="before it started")
    if isinstance(e, JobRejected):
        return Step(at=at, seq=seq, what="rejected", text=f"{e.field}: {e.message}")
    return None
