"""One trace per job (docs/adr/0016), carried in W3C trace context in message headers.

Every append carries the current context. A job's trace is the one its ``JobSubmitted``
carries (in a batch, its entry of the ``JobsSubmitted``): the submitting client's,
continued by the intake. Every service that appends an event about a job does so inside a
span of that trace (``job_span``), so the event carries the job's context too; a planning
cycle is a trace of its own, linked from the job spans of the jobs it decided on.

Spans are exported over OTLP/HTTP only where the standard ``OTEL_*`` variables ask for it
(``configure``). Otherwise the API's no-op tracer is all there is: spans cost next to
nothing, and the context still travels.
"""

import contextlib
import logging
import os
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager

from opentelemetry import context, propagate, trace
from opentelemetry.trace import Link, Span

from allot.bus.eventlog import Record, submitted_traces
from allot.bus.traced import exporting

tracer = trace.get_tracer("allot")
log = logging.getLogger("allot.tracing")
CARRIED = ("traceparent", "tracestate")  # the headers W3C trace context travels in


def inject(headers: dict[str, str]) -> dict[str, str]:
    """Add the current trace context (``traceparent``, ``tracestate``) to ``headers``."""
    propagate.inject(headers)
    return headers


def extract(headers: Mapping[str, str] | None) -> context.Context:
    """The trace context a message carried, to parent the spans that handle it."""
    return propagate.extract(dict(headers or {}))


def request_span(name: str, headers: Mapping[str, str] | None) -> AbstractContextManager[object]:
    """The span a request is handled in, a child of the context it carried. None where no
    spans are recorded here and the request carried no context: there would be nothing to
    record nor to carry on, and a request in a burst should not pay for it."""
    carried = headers is not None and "traceparent" in headers
    if not carried and isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return contextlib.nullcontext()
    return tracer.start_as_current_span(name, context=extract(headers))


def configure(service: str) -> bool:
    """Export this process's spans over OTLP/HTTP as ``allot-<service>`` (or
    ``$OTEL_SERVICE_NAME``), where the standard variables ask for it; the exporter reads
    its endpoint, headers and timeout from them too. Whether it does."""
    if not exporting():
        return False
    protocol = os.environ.get(
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "")
    )
    if protocol and protocol != "http/protobuf":
        log.warning("OTEL_EXPORTER_OTLP_PROTOCOL=%s: Allot exports over http/protobuf", protocol)
    # Imported here: a process that exports nothing never loads the SDK.
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    named = {} if os.environ.get("OTEL_SERVICE_NAME") else {SERVICE_NAME: f"allot-{service}"}
    provider = TracerProvider(resource=Resource.create(named))  # flushes at exit
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    return True


class JobTraces:
    """The trace of each job, as its ``JobSubmitted`` carried it: what a service folding
    the log needs to append about a job inside the job's trace."""

    def __init__(self) -> None:
        self._carriers: dict[str, dict[str, str]] = {}

    def note(self, record: Record) -> None:
        for job_id, carried in submitted_traces(record):
            carrier = {k: carried[k] for k in CARRIED if k in carried}
            if carrier:
                self._carriers[job_id] = carrier

    def context(self, job_id: str) -> context.Context:
        """The job's trace; a task of a job array (``<array>_<index>``) is in its array's."""
        carriers = self._carriers
        carrier = carriers.get(job_id) or carriers.get(job_id.rpartition("_")[0], {})
        return propagate.extract(carrier)


Attributes = Mapping[str, str | int | bool]


@contextlib.contextmanager
def job_span(traces: JobTraces, job_id: str, name: str, attributes: Attributes) -> Iterator[Span]:
    """A span in ``job_id``'s trace, linked to the span current here (the request or the
    cycle that led to it); what is appended inside it carries the job's trace."""
    with tracer.start_as_current_span(
        name, context=traces.context(job_id), links=_here(), attributes=attributes
    ) as span:
        yield span


def record_job_span(
    traces: JobTraces, job_id: str, name: str, start: int, end: int, attributes: Attributes
) -> None:
    """A span in ``job_id``'s trace that has already happened (from ``start`` to ``end``,
    ns): a part a job had in something larger, such as a planning cycle, linked to it."""
    span = tracer.start_span(
        name, context=traces.context(job_id), links=_here(), attributes=attributes,
        start_time=start,
    )  # fmt: skip
    span.end(end)


def _here() -> list[Link]:
    current = trace.get_current_span().get_span_context()
    return [Link(current)] if current.is_valid else []
