"""An OTLP/HTTP trace receiver for tests, run as its own process: it takes what exporters
post to ``/v1/traces`` (protobuf, as the standard says) and writes one JSON line per span
to a file. ``python -m tests.otlp_receiver FILE`` prints the port it listens on."""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


def value(any_value: AnyValue) -> Any:
    kind = any_value.WhichOneof("value")
    return (
        getattr(any_value, kind)
        if kind in ("string_value", "int_value", "bool_value", "double_value")
        else str(any_value)
    )


def spans_of(request: ExportTraceServiceRequest) -> list[dict[str, Any]]:
    spans = []
    for resource_spans in request.resource_spans:
        resource = {a.key: value(a.value) for a in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append({
                    "service": resource.get("service.name", ""),
                    "trace_id": span.trace_id.hex(),
                    "span_id": span.span_id.hex(),
                    "parent_span_id": span.parent_span_id.hex(),
                    "name": span.name,
                    "start": span.start_time_unix_nano,
                    "end": span.end_time_unix_nano,
                    "attributes": {a.key: value(a.value) for a in span.attributes},
                    "links": [
                        {"trace_id": link.trace_id.hex(), "span_id": link.span_id.hex()}
                        for link in span.links
                    ],
                })  # fmt: skip
    return spans


def main(out: Path) -> None:
    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.path != "/v1/traces":
                self.send_error(404)
                return
            request = ExportTraceServiceRequest.FromString(body)
            with out.open("a") as lines:
                for span in spans_of(request):
                    lines.write(json.dumps(span) + "\n")
            reply = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
