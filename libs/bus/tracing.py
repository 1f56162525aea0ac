"""W3C trace context carried in message headers: every append carries the current context,
and a handler continues the trace of the message it handles (the intake does for commands)."""

from collections.abc import Mapping

from opentelemetry import context, propagate, trace

tracer = trace.get_tracer("allot")


def inject(headers: dict[str, str]) -> dict[str, str]:
    """Add the current trace context (``traceparent``, ``tracestate``) to ``headers``."""
    propagate.inject(headers)
    return headers


def extract(headers: Mapping[str, str] | None) -> context.Context:
    """The trace context a message carried, to parent the spans that handle it."""
    return propagate.extract(dict(headers or {}))
