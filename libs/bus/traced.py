"""Whether this process traces, and the trace context what it sends carries, answered
without loading OpenTelemetry where nothing here traces: ``allot submit`` would spend a
tenth of its start-up importing it for nothing. The services load ``allot.bus.tracing``,
which does the tracing itself."""

import contextlib
import os
import sys
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opentelemetry.trace import Span


def exporting() -> bool:
    """Whether the standard variables ask for spans to be exported."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter == "none":
        return False
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    )
    return bool(endpoint) or exporter == "otlp"


def loaded() -> bool:
    """Whether anything in this process can have begun a trace: until OpenTelemetry's
    context is loaded, the current context is empty and there is nothing to carry."""
    return "opentelemetry.context" in sys.modules


def carry(headers: dict[str, str]) -> dict[str, str]:
    """``headers`` with the current trace context added, if there is one."""
    if not loaded():
        return headers
    from allot.bus import tracing

    return tracing.inject(headers)


@contextlib.contextmanager
def client_span(name: str, attributes: Mapping[str, str | int | bool]) -> Iterator["Span | None"]:
    """A client span, current inside (so what is sent from there carries it); None where
    nothing in this process traces."""
    if not loaded():
        yield None
        return
    from opentelemetry.trace import SpanKind

    from allot.bus import tracing

    with tracing.tracer.start_as_current_span(name, kind=SpanKind.CLIENT) as span:
        span.set_attributes(attributes)
        yield span
