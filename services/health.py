"""Each service process's health over HTTP, for Kubernetes' probes and compose's
healthchecks (docs/adr/0025), on ``--health-port`` when it is given:

- ``GET /livez``: 200 while the process's event loop answers. A loop that does not is a
  process to restart.
- ``GET /readyz``: 200 once the process is connected to NATS and has folded the log up to
  its end, and has acted on it (a service that answers commands takes them from then on);
  503, with the reason, before that and whenever NATS is away.

The follow loop of every service (``runtime.follow_state``) reports each time it has
caught up through ``caught_up``; it reaches the process's ``Health`` through a context
variable that ``run_service`` sets, so services run side by side in one process (as tests
do) report to none.
"""

import asyncio
import contextlib
import contextvars
from collections.abc import Callable

READ_LIMIT_S = 5.0  # a probe that sends no request line in this long is dropped
MAX_REQUEST_LINE = 1024


class Health:
    """What ``/readyz`` answers from: whether the process is connected, and the sequence
    of the log it last caught up at (None: not yet)."""

    def __init__(self) -> None:
        self.connected: Callable[[], bool] | None = None  # None: not yet connected once
        self.caught_up_at: int | None = None

    def caught_up(self, seq: int) -> None:
        self.caught_up_at = seq  # the follow loop logs the first time (allot.services.runtime)

    def not_ready(self) -> str | None:
        """Why the process is not ready, or None when it is."""
        if self.connected is None:
            return "connecting to NATS"
        if not self.connected():
            return "not connected to NATS"
        if self.caught_up_at is None:
            return "still reading the log"
        return None


_current: contextvars.ContextVar[Health | None] = contextvars.ContextVar(
    "allot_health", default=None
)


def reporting_to(health: Health) -> None:
    """Let the follow loops run in this context (and the tasks it starts) report to
    ``health``."""
    _current.set(health)


def caught_up(seq: int) -> None:
    """Tell this process's health check, if it has one, that the log is folded up to its
    end at ``seq`` and acted on."""
    health = _current.get()
    if health is not None:
        health.caught_up(seq)


async def serve(health: Health, host: str, port: int) -> asyncio.Server:
    """Answer ``/livez`` and ``/readyz`` on ``host``:``port``; the server runs until closed."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), READ_LIMIT_S)
            status, body = _route(health, line[:MAX_REQUEST_LINE])
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                + body
            )
            await writer.drain()
        except (TimeoutError, ConnectionError, ValueError):
            pass  # a probe that went away, or sent no request line, asks again
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    return await asyncio.start_server(answer, host, port)


def _route(health: Health, request_line: bytes) -> tuple[str, bytes]:
    parts = request_line.decode("latin-1").split()
    if len(parts) < 2 or parts[0] != "GET":
        return "405 Method Not Allowed", b"GET /livez or /readyz\n"
    path = parts[1].split("?", 1)[0]
    if path == "/livez":
        return "200 OK", b"ok\n"
    if path == "/readyz":
        why = health.not_ready()
        if why is None:
            return "200 OK", f"ready: caught up at sequence {health.caught_up_at}\n".encode()
        return "503 Service Unavailable", f"not ready: {why}\n".encode()
    return "404 Not Found", b"GET /livez or /readyz\n"
