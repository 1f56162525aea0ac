"""A job's trace, read from the log alone (docs/adr/0016): ``allot trace JOB`` prints it as
a waterfall, ``allot trace export`` sends it over OTLP to a tracing backend that was down or
not there yet when the job ran.

The log holds when each event about a job happened and the trace its submission began, so
the spans follow from it: the job from submission to its end, each wait in the queue, each
run (attempt) with its nodes, each stop from request to exit; the plans that admitted the
job, told it why it waits or chose it to stop, its checkpoints and exits are points in
time within them. Span ids are derived from the trace and the records, so exporting twice
sends the same spans again, not new ones.
"""

import hashlib
from collections.abc import Iterable, Mapping, Sequence

import msgspec

from allot.bus.eventlog import Record, submitted_traces
from allot.client.render import human_duration as took
from allot.core import State, apply_record
from allot.proto.events import (
    GraceTooShort,
    JobCancelled,
    JobCancelRequested,
    JobCheckpointed,
    JobEvent,
    JobExited,
    JobPreempted,
    JobRejected,
    JobRequeued,
    JobStarted,
    JobSubmitted,
    KillRequested,
    MaxWaitExceeded,
    PlanComputed,
    StopRequested,
    job_events,
    submissions,
)

Value = str | int | bool
BAR = 32  # characters of a waterfall's bars


class Point(msgspec.Struct, frozen=True, kw_only=True):
    """Something that happened at one moment within a span (an OpenTelemetry span event)."""

    at: int
    name: str
    attributes: dict[str, Value] = {}


class LogSpan(msgspec.Struct, kw_only=True):
    name: str
    span_id: str  # 16 hex digits
    parent_id: str  # "" for a span whose parent is outside the log
    start: int
    end: int | None = None  # None: still going on when the log was read
    attributes: dict[str, Value] = {}
    points: list[Point] = []
    depth: int = 0  # in the tree of spans, the job's own being 0


class JobTrace(msgspec.Struct, kw_only=True):
    job_id: str
    trace_id: str  # 32 hex digits: the trace the submission began, or one derived from the job
    parent_id: str  # the span the submission came from (the client's), "" if none
    status: str
    ended: bool  # it reached an end state
    spans: list[LogSpan]  # the job's own first, then in the order they began
    now: int  # the time of the last record read: where spans still going on end for now


class NoSuchJob(LookupError):
    pass


def folded(records: Sequence[Record]) -> State:
    """The log folded: what ``job_trace`` reads the jobs' ends from."""
    state = State()
    for record in records:
        apply_record(state, record, records)
    return state


def job_trace(job_id: str, records: Sequence[Record], state: State | None = None) -> JobTrace:
    """The trace of ``job_id`` from ``records``, the log in order (``state``: the log
    folded, where the caller has it). A task of a job array is in its array's trace, from
    the array's submission, and a cancel of the whole array is one of its steps."""
    state = folded(records) if state is None else state
    job = state.jobs.get(job_id)
    if job is None:
        tasks = state.arrays[job_id].tasks if job_id in state.arrays else []
        which = f"; {job_id} is a job array: trace one of its tasks ({tasks[0]}…)" if tasks else ""
        raise NoSuchJob(f"no job {job_id!r} in the log{which}")
    own = {job_id} if job.array_id is None else {job_id, job.array_id}
    carried = next(
        (trace for r in records for submitted, trace in submitted_traces(r) if submitted in own),
        None,
    )
    if carried is None:
        raise NoSuchJob(f"no job {job_id!r} in the log")
    trace_id, parent_id = _trace_of(job.array_id or job_id, carried)
    build = _Builder(trace_id)
    for record in records:
        if isinstance(record.event, PlanComputed):
            build.plan(job_id, record.seq, record.event)
        for event in job_events(record.event):
            if event.job_id in own:
                build.event(record.seq, event)
    now = max((r.event.meta.at for r in records if r.event is not None), default=0)
    for span in build.spans:
        if span.end is None and job.status.terminal:
            span.end = job.ended_at
    return JobTrace(
        job_id=job_id, trace_id=trace_id, parent_id=parent_id, status=str(job.status),
        ended=job.status.terminal, spans=build.spans, now=now,
    )  # fmt: skip


def _trace_of(job_id: str, headers: Mapping[str, str]) -> tuple[str, str]:
    """The trace and parent span the submission carried (W3C ``traceparent``), or a trace
    id of the job's own when it carried none."""
    parts = headers.get("traceparent", "").split("-")
    if len(parts) == 4 and len(parts[1]) == 32 and len(parts[2]) == 16:
        with_digits = all(c in "0123456789abcdef" for c in parts[1] + parts[2])
        if with_digits and parts[1] != "0" * 32 and parts[2] != "0" * 16:
            return parts[1], parts[2]
    return hashlib.blake2b(f"allot-job:{job_id}".encode(), digest_size=16).hexdigest(), ""


class _Builder:
    """The spans of one job, built as the log is read."""

    def __init__(self, trace_id: str):
        self.trace_id = trace_id
        self.spans: list[LogSpan] = []
        self.job: LogSpan | None = None
        self.queued: LogSpan | None = None
        self.run: LogSpan | None = None
        self.stopping: LogSpan | None = None

    def _open(
        self, name: str, seq: int, at: int, parent: LogSpan | None, attributes: Mapping[str, Value]
    ) -> LogSpan:
        digest = hashlib.blake2b(f"{self.trace_id}:{name}:{seq}".encode(), digest_size=8)
        span = LogSpan(
            name=name, span_id=digest.hexdigest(), parent_id=parent.span_id if parent else "",
            start=at, attributes=dict(attributes), depth=parent.depth + 1 if parent else 0,
        )  # fmt: skip
        self.spans.append(span)
        return span

    def _point(
        self,
        span: LogSpan | None,
        at: int,
        name: str,
        attributes: Mapping[str, Value] | None = None,
    ) -> None:
        target = span or self.job
        if target is not None:
            target.points.append(Point(at=at, name=name, attributes=dict(attributes or {})))

    @staticmethod
    def _close(span: LogSpan | None, at: int) -> None:
        if span is not None and (span.end is None or span.end < at):
            span.end = at

    def plan(self, job_id: str, seq: int, plan: PlanComputed) -> None:
        at, by = plan.meta.at, {"allot.plan.seq": seq, "allot.basis_seq": plan.basis_seq}
        for admitted in plan.admissions:
            if admitted.job_id == job_id:
                nodes = ", ".join(f"{p.node_id} {p.gpus}" for p in admitted.placements)
                self._point(self.queued, at, f"admitted to {nodes}", by)
        for waiting in plan.pending:
            if waiting.job_id == job_id:
                self._point(self.queued, at, f"waiting: {waiting.code}", by)
        for chosen in plan.preemptions:
            if chosen.job_id == job_id:
                why = f"{chosen.code} for {chosen.params.get('for', '')}".strip()
                self._point(self.run, at, f"chosen to stop: {why}", by)

    def event(self, seq: int, event: JobEvent) -> None:
        at = event.meta.at
        match event:
            case JobSubmitted(spec=spec, by=by):
                self.job = self._open(
                    f"job {event.job_id}", seq, at, None, {"allot.job.id": event.job_id,
                    "allot.account": spec.account, "allot.tier": spec.tier,
                    "allot.gpus": spec.gpus, "allot.submitted_by": by},
                )  # fmt: skip
                self.queued = self._open("queued", seq, at, self.job, {"allot.attempt": 0})
            case JobRejected(field=field, message=message):
                self._point(self.job, at, f"rejected: {field}: {message}")
                self._close(self.queued, at)
                self._close(self.job, at)
            case JobStarted(node_id=node, attempt=attempt):
                if self.run is None or self.run.attributes["allot.attempt"] != attempt:
                    self._close(self.queued, at)
                    self.queued, self.stopping = None, None
                    self.run = self._open(
                        f"run {attempt}", seq, at, self.job, {"allot.attempt": attempt}
                    )
                nodes = str(self.run.attributes.get("allot.node", ""))
                self.run.attributes["allot.node"] = f"{nodes},{node}" if nodes else node
                self._point(self.run, at, f"started on {node}", {"allot.pid": event.pid})
            case JobCheckpointed(step=step):
                self._point(self.run, at, f"checkpoint {step if step is not None else ''}".strip())
            case StopRequested(reason=reason, grace_ns=grace, kind=kind):
                self.stopping = self._open(
                    "stopping", seq, at, self.run or self.job,
                    {"allot.reason": reason, "allot.grace_ns": grace, "allot.stop.kind": kind},
                )  # fmt: skip
            case KillRequested(reason=reason):
                self._point(self.stopping or self.run, at, f"kill: {reason}")
            case GraceTooShort(measured_ns=measured):
                self._point(self.stopping or self.run, at, f"grace too short: {took(measured)}")
            case JobExited(node_id=node, exit_code=code, reason=reason):
                said = f"exited on {node}: {code if code is not None else reason}"
                self._point(self.run, at, said)
                self._close(self.stopping, at)
                self._close(self.run, at)
            case JobCancelled(node_id=node):
                self._point(self.run, at, f"cancelled on {node}" if node else "cancelled")
                self._close(self.queued, at)
                self._close(self.run, at)
            case JobPreempted(lost_gpu_ms=lost):
                self._point(self.run, at, f"preempted: lost {lost / 1000:.1f} GPU-s")
                self._close(self.stopping, at)
                self._close(self.run, at)
            case JobRequeued(reason=reason):
                self.run, self.stopping = None, None
                attempt = sum(1 for span in self.spans if span.name.startswith("run "))
                self.queued = self._open("queued", seq, at, self.job, {"allot.attempt": attempt})
                self._point(self.queued, at, f"requeued: {reason}")
            case JobCancelRequested(by=by, reason=reason):
                self._point(self.job, at, f"cancel requested by {by or 'someone'}: {reason}")
            case MaxWaitExceeded(account=account, waited_ns=waited):
                self._point(self.queued, at, f"waited {took(waited)}: past {account}'s target")


def waterfall(trace: JobTrace) -> str:
    """The trace as lines of text: each span's start, length and bar against the job's,
    with what happened within it in the order it happened."""
    job = trace.spans[0]
    origin, finish = job.start, job.end if job.end is not None else trace.now
    width = max(finish - origin, 1)
    shape = (
        ", ".join(str(job.attributes.get(key)) for key in ("allot.account", "allot.tier"))
        + f", {job.attributes.get('allot.gpus')} GPUs"
    )
    lines = [
        f"{trace.job_id} ({shape}): {trace.status}, {took(finish - origin)}; "
        f"trace {trace.trace_id}",
        f"{'start':>10} {'took':>10}  span",
    ]
    children: dict[str, list[LogSpan]] = {}
    for span in trace.spans[1:]:
        children.setdefault(span.parent_id, []).append(span)

    def bar(span: LogSpan) -> str:
        end = span.end if span.end is not None else trace.now
        left = min(round((span.start - origin) / width * BAR), BAR - 1)
        length = min(max(1, round((end - span.start) / width * BAR)), BAR - left)
        lasted = took(end - span.start) + ("…" if span.end is None else "")
        node = f" on {span.attributes['allot.node']}" if "allot.node" in span.attributes else ""
        label = "  " * span.depth + span.name + node
        mark = " " * left + "█" * length
        return f"{took(span.start - origin):>10} {lasted:>10}  {label:<34}|{mark:<{BAR}}|"

    def show(span: LogSpan) -> None:
        lines.append(bar(span))
        within: list[tuple[int, int, Point | LogSpan]] = [
            *((point.at, 0, point) for point in _merged(span.points)),
            *((child.start, 1, child) for child in children.get(span.span_id, [])),
        ]
        for _, _, item in sorted(within, key=lambda item: item[:2]):
            if isinstance(item, LogSpan):
                show(item)
            else:
                indent = "  " * (span.depth + 1)
                lines.append(f"{took(item.at - origin):>10} {'':>10}  {indent}· {item.name}")

    show(job)
    return "\n".join(lines)


def _merged(points: list[Point]) -> list[Point]:
    """``points`` with each run of more than two checkpoints said once: a long training
    checkpoints thousands of times."""
    merged: list[Point] = []
    run: list[Point] = []
    for point in [*points, Point(at=0, name="")]:
        if point.name.startswith("checkpoint"):
            run.append(point)
            continue
        if len(run) > 2:
            first, last = run[0].name.removeprefix("checkpoint").strip(), run[-1].name
            said = f"{len(run)} checkpoints, {first} to {last.removeprefix('checkpoint').strip()}"
            merged.append(Point(at=run[0].at, name=said))
        else:
            merged.extend(run)
        run = []
        if point.name:
            merged.append(point)
    return merged


def jobs_since(records: Iterable[Record], since: int, state: State) -> list[str]:
    """The jobs of ``state`` (the log folded) submitted at or after ``since`` (ns), in the
    order of the log; of an array, each of its tasks."""
    jobs: list[str] = []
    for r in records:
        for event in submissions(r.event):
            if event.meta.at >= since:
                array = state.arrays.get(event.job_id)
                jobs += array.tasks if array is not None else [event.job_id]
    return [job_id for job_id in jobs if job_id in state.jobs]


def export(traces: Sequence[JobTrace]) -> int:
    """Send ``traces`` over OTLP/HTTP, where the standard ``OTEL_EXPORTER_OTLP_*`` variables
    say, as the service ``allot-log``; how many spans went. Raises ``ExportFailed``."""
    # Imported here: only exporting needs the SDK.
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import Event as SpanEvent
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExportResult
    from opentelemetry.trace import SpanContext, TraceFlags

    resource = Resource.create({SERVICE_NAME: "allot-log"})

    def context(trace_id: str, span_id: str, remote: bool = False) -> SpanContext:
        flags = TraceFlags(TraceFlags.SAMPLED)
        return SpanContext(int(trace_id, 16), int(span_id, 16), remote, trace_flags=flags)

    spans = []
    for trace in traces:
        for span in trace.spans:
            parent_id = span.parent_id or trace.parent_id
            spans.append(
                ReadableSpan(
                    name=span.name,
                    context=context(trace.trace_id, span.span_id),
                    parent=context(trace.trace_id, parent_id, True) if parent_id else None,
                    resource=resource,
                    attributes=span.attributes,
                    events=[SpanEvent(p.name, p.attributes, p.at) for p in span.points],
                    start_time=span.start,
                    end_time=span.end if span.end is not None else trace.now,
                )
            )
    exporter = OTLPSpanExporter()
    try:
        if spans and exporter.export(spans) is not SpanExportResult.SUCCESS:
            where = exporter._endpoint  # what the OTEL_EXPORTER_OTLP_* variables made of it
            raise ExportFailed(f"{where} did not take {len(spans)} spans; is it up?")
    finally:
        exporter.shutdown()  # type: ignore[no-untyped-call]
    return len(spans)


class ExportFailed(RuntimeError):
    pass
