"""The dashboard (docs/adr/0022): the read model's answers as a JSON API and a few HTML
pages, served by the view service itself from the model it folds, so nothing folds the
log a second time and a page says what ``allot queue`` says at the same sequence.

Every route only reads. ``/api/events`` sends the folded sequence as it moves (at most
``EVENTS_PER_S`` times a second), and the pages fetch their data again on each: they stay
current without being reloaded. Queries take the parameters of their NATS twins
(``allot.proto.queries``) and are refused, naming the field, as those are.
"""

import asyncio
import contextlib
import ipaddress
import json
import logging
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Coroutine, Generator
from pathlib import Path
from typing import Any

import msgspec
import uvicorn
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from allot.bus.eventlog import EventLog
from allot.bus.log import Log
from allot.core import JobRecord
from allot.core.ranks import processes
from allot.proto.commands import FieldError
from allot.proto.queries import (
    DEFAULT_WINDOW_NS,
    AccountsQuery,
    Answer,
    ExplainQuery,
    JobQuery,
    JobsQuery,
    NodesQuery,
    QueueQuery,
)
from allot.services.replies import decode_request
from allot.services.view.joblog import JobRecords, trace_view
from allot.services.view.model import ReadModel, owed_report

log = logging.getLogger("allot.view")
STATIC = Path(__file__).parent / "static"
# Path -> the page there and its title: each page's <main>, in one layout (layout.html).
PAGES = {
    "/": ("queue", "Queue"),
    "/nodes": ("nodes", "GPUs"),
    "/accounts": ("accounts", "Accounts"),
    "/jobs/{job_id}": ("job", "Job"),
}
EVENTS_PER_S = 4
RETRY_MS = 1000  # how soon a browser connects again after losing the stream
KEEP_ALIVE_S = 15.0  # a comment on a quiet stream, so proxies keep it open
MAX_STREAMS = 64  # open event streams; each costs a wake-up every 1/EVENTS_PER_S s
MAX_TRACES = 4  # traces read from the log at once
MAX_QUERY_CHARS = 4096
SHOWN_VALUE = 80  # characters of a refused value said back
STOP_S = 2.0  # how long stopping waits for requests under way
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
# GPU-hours owed and delivered are computed again this often at most, and never more than
# 1 / OWED_SHARE of the time: a log that takes 3 s to read and fold, once a minute.
OWED_EVERY_S = 10.0
OWED_SHARE = 20


# Scripts, styles and data from this server only; nothing of it in a frame elsewhere.
def security_headers(websocket: str | None) -> list[tuple[bytes, bytes]]:
    """Scripts, styles and data from this server only (and NATS's websocket, where the
    pages act as their user); nothing of it in a frame elsewhere."""
    connect = f"connect-src 'self' {websocket}; " if websocket else ""
    policy = ("default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
              f"{connect}form-action 'self'; frame-ancestors 'none'")  # fmt: skip
    return [
        (b"content-security-policy", policy.encode()),
        (b"x-content-type-options", b"nosniff"),
        (b"referrer-policy", b"no-referrer"),
        (b"cache-control", b"no-store"),
    ]


class Dashboard:
    def __init__(
        self,
        model: ReadModel,
        *,
        ready: Callable[[], bool],
        job_records: JobRecords | None = None,
        hosts: Collection[str] | None = None,
        websocket: str | None = None,
    ):
        """``ready``: whether the model has read the log to its end (until then, answers
        would describe a log half read); ``job_records``: where a job's trace is read
        from (None: traces are not shown); ``hosts``: the only names a request may call
        this server by (None: any); ``websocket``: where a browser connects to NATS as
        its user, to act and to read output with that user's rights (None: it cannot)."""
        self.model = model
        self.ready = ready
        self.job_records = job_records
        self.websocket = websocket
        self.stopping = asyncio.Event()  # set: every event stream ends
        self.streams = 0
        self._tracing = asyncio.Semaphore(MAX_TRACES)
        api = [
            Route("/api/queue", self.queue),
            Route("/api/nodes", self.nodes),
            Route("/api/accounts", self.accounts),
            Route("/api/jobs", self.jobs),
            Route("/api/jobs/{job_id}", self.job),
            Route("/api/jobs/{job_id}/trace", self.trace),
            Route("/api/events", self.events),
            Route("/api/config", self.config),
        ]
        pages = [Route(path, _page(name, title)) for path, (name, title) in PAGES.items()]
        static = Mount("/static", StaticFiles(directory=STATIC), name="static")
        headers = security_headers(websocket)
        self.app: ASGIApp = _Secured(Starlette(routes=[*api, *pages, static]), hosts, headers)

    # --- the API --------------------------------------------------------------------

    async def queue(self, request: Request) -> Response:
        query = _query(request, QueueQuery, ints={"limit", "offset"}, lists={"accounts"})
        return self._answer(query, self.model.queue)

    async def nodes(self, request: Request) -> Response:
        return self._answer(_query(request, NodesQuery), self.model.nodes, missing=404)

    async def accounts(self, request: Request) -> Response:
        return self._answer(_query(request, AccountsQuery, ints={"window_ns"}), self.model.accounts)

    async def jobs(self, request: Request) -> Response:
        query = _query(
            request,
            JobsQuery,
            ints={"limit", "before", "before_index"},
            lists={"states", "accounts", "users"},
        )
        return self._answer(query, self.model.jobs)

    async def job(self, request: Request) -> Response:
        """The job and why it is where it is (its explanation, with its trail)."""
        job = self._job_asked(request)
        if isinstance(job, Response):
            return job
        # The NATS queries' own answers: the job, and why it is where it is.
        whole = self.model.job(JobQuery(job_id=job.job_id))
        explained = self.model.explain(ExplainQuery(job_id=job.job_id))
        # Which node runs which workers: where the page asks for each one's output.
        ran = [msgspec.structs.asdict(p) | {"ranks": p.ranks, "started": p.node_id in
               job.started_on} for p in processes(job)]  # fmt: skip
        return _json({"seq": whole.seq, "job": whole.data, "explain": explained.data,
                      "traced": self.job_records is not None, "processes": ran})  # fmt: skip

    async def trace(self, request: Request) -> Response:
        """The job's trace, read from its own records in the log."""
        job = self._job_asked(request)
        if isinstance(job, Response):
            return job
        if self.job_records is None:
            return _unavailable("job_id", "traces are not read by this server")
        async with self._tracing:
            try:
                records = await self.job_records(job, self.model.plan_seqs(job.job_id))
            except TimeoutError:
                return _unavailable("log", "the log did not answer in time; try again")
        view = trace_view(job, records, self.model.clock.now())
        return _json({"seq": self.model.state.seq, "trace": view})

    async def config(self, request: Request) -> Response:
        """What the pages need to know of this installation: where a browser reaches NATS
        as its user (None: the pages only read)."""
        return _json({"websocket": self.websocket})

    def _job_asked(self, request: Request) -> JobRecord | Response:
        """The job the path names, or the answer that says why there is none."""
        if request.url.query:
            return _error(_field("query", request.url.query, "no parameters are taken"), 400)
        payload = msgspec.json.encode({"job_id": request.path_params["job_id"]})
        query = decode_request(payload, JobQuery)
        if (refused := self._refused(query)) is not None:
            return refused
        assert isinstance(query, JobQuery)
        job = self.model.state.jobs.get(query.job_id)
        if job is None:
            array = self.model.state.arrays.get(query.job_id)
            said = (
                "no such job"
                if array is None
                else f"a job array: its tasks are jobs ({array.tasks[0]}…)"
            )
            return _error(FieldError(field="job_id", value=query.job_id, message=said))
        return job

    async def events(self, request: Request) -> Response:
        if self.streams >= MAX_STREAMS:
            return _unavailable("events", f"{MAX_STREAMS} streams are open already")
        headers = {"cache-control": "no-store", "x-accel-buffering": "no"}
        return StreamingResponse(self._sequences(), media_type="text/event-stream", headers=headers)

    async def _sequences(self) -> AsyncIterator[str]:
        """``seq`` events as the fold moves or the queue is computed again (at most every
        ``refresh_s`` after the log moved: a page that fetched the queue before has an
        older one), until the server stops."""
        self.streams += 1
        try:
            yield f"retry: {RETRY_MS}\n\n"
            sent: dict[str, int | bool] | None = None
            quiet = 0.0
            while not self.stopping.is_set():
                seq, queue_seq = self.model.state.seq, self.model.derived.seq
                now = {"seq": seq, "queue_seq": queue_seq, "ready": self.ready()}
                if now != sent:
                    yield f"event: seq\ndata: {json.dumps(now)}\n\n"
                    sent, quiet = now, 0.0
                elif quiet >= KEEP_ALIVE_S:
                    yield ": keep-alive\n\n"
                    quiet = 0.0
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.stopping.wait(), 1 / EVENTS_PER_S)
                quiet += 1 / EVENTS_PER_S
        finally:
            self.streams -= 1

    def _answer(
        self,
        query: msgspec.Struct | FieldError,
        method: Callable[[Any], Answer],
        missing: int = 400,
    ) -> Response:
        """The model's answer to ``query``; an answer with errors (what is not there) is
        ``missing``."""
        if (refused := self._refused(query)) is not None:
            return refused
        answer = method(query)
        return _json(answer, missing if answer.errors else 200)

    def _refused(self, query: msgspec.Struct | FieldError) -> Response | None:
        if isinstance(query, FieldError):
            return _error(query, 400)
        if not self.ready():
            return _unavailable("log", f"still reading the log (at {self.model.state.seq})")
        return None


def _query(
    request: Request,
    kind: type[msgspec.Struct],
    ints: frozenset[str] | set[str] = frozenset(),
    lists: frozenset[str] | set[str] = frozenset(),
) -> msgspec.Struct | FieldError:
    """The query the URL's parameters make, or why they make none (naming the field, as a
    query over NATS would be told). ``ints``: the whole numbers; ``lists``: the fields a
    parameter given again adds to."""
    text = request.url.query
    if len(text) > MAX_QUERY_CHARS:
        return _field("query", text, f"longer than {MAX_QUERY_CHARS} characters")
    given: dict[str, Any] = {}
    for key in dict.fromkeys(request.query_params.keys()):
        values = request.query_params.getlist(key)
        if key in lists:
            given[key] = values
            continue
        if len(values) > 1:
            return _field(key, values[1], "given more than once")
        if key in ints or key == "at_least":
            try:
                given[key] = int(values[0])
            except ValueError:
                return _field(key, values[0], "expected a whole number")
        else:
            given[key] = values[0]
    return decode_request(msgspec.json.encode(given), kind)


def _field(field: str, value: str, message: str) -> FieldError:
    said = value if len(value) <= SHOWN_VALUE else value[:SHOWN_VALUE] + "…"
    return FieldError(field=field, value=said, message=message)


def _json(data: Any, status: int = 200) -> Response:
    return Response(msgspec.json.encode(data), status, media_type="application/json")


def _error(error: FieldError, status: int = 404) -> Response:
    return _json({"errors": [error]}, status)


def _unavailable(field: str, message: str) -> Response:
    return _error(FieldError(field=field, value="", message=message), 503)


def _page(name: str, title: str) -> Callable[[Request], Awaitable[Response]]:
    layout = (STATIC / "layout.html").read_text()
    filled = {"{title}": title, "{page}": name, "{main}": (STATIC / f"{name}.html").read_text()}
    html = layout
    for placeholder, text in filled.items():
        html = html.replace(placeholder, text)

    async def page(request: Request) -> Response:
        return HTMLResponse(html)

    return page


def names_for(host: str) -> frozenset[str] | None:
    """The names a browser may call a server bound to ``host`` by: for this machine's own
    addresses, only those of this machine, so that a page elsewhere cannot read the API
    through a name of its own that it points here (DNS rebinding); else any."""
    with contextlib.suppress(ValueError):
        if ipaddress.ip_address(host).is_loopback:
            return LOOPBACK_NAMES
    return LOOPBACK_NAMES if host == "localhost" else None


class _Secured:
    """Refuses a request that names a host not in ``hosts``; adds ``headers`` to every
    response."""

    def __init__(
        self, app: ASGIApp, hosts: Collection[str] | None, headers: list[tuple[bytes, bytes]]
    ):
        self.app = app
        self.hosts = None if hosts is None else frozenset(hosts)
        self.headers = headers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.hosts is not None:
            named = Headers(scope=scope).get("host", "")
            if _without_port(named) not in self.hosts:
                refused = _field("host", named, f"this server answers to {sorted(self.hosts)}")
                await _error(refused, 400)(scope, receive, send)
                return

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *self.headers]
            await send(message)

        await self.app(scope, receive, secured)


def _without_port(host: str) -> str:
    """``[::1]:8265`` -> ``::1``, ``localhost:8265`` -> ``localhost``."""
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class _Server(uvicorn.Server):
    """uvicorn within a service: the service's own signal handling stops it
    (``allot.services.runtime.run_service``), so uvicorn must not take the signals."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


def listen(host: str, port: int) -> socket.socket:
    """The dashboard's socket, bound before serving so that a port in use says so at once
    (port 0: a free one)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, port), family=family)


async def serve(dashboard: Dashboard, sock: socket.socket) -> None:
    """Serve the dashboard on ``sock`` until cancelled; then end the event streams and
    stop, waiting for requests under way for ``STOP_S`` at most."""
    config = uvicorn.Config(
        dashboard.app, lifespan="off", log_config=None, log_level="warning", access_log=False,
        timeout_graceful_shutdown=int(STOP_S), server_header=False,
    )  # fmt: skip
    server = _Server(config)
    host, port = sock.getsockname()[:2]
    log.info("dashboard on http://%s:%d/", host if ":" not in host else f"[{host}]", port)
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        await asyncio.shield(serving)
    finally:
        dashboard.stopping.set()
        server.should_exit = True
        with contextlib.suppress(Exception):
            await asyncio.wait_for(serving, STOP_S + 1)


async def keep_owed(
    events: Log,
    model: ReadModel,
    ready: Callable[[], bool],
    every_s: float = OWED_EVERY_S,
    window_ns: int = DEFAULT_WINDOW_NS,
) -> None:
    """Compute GPU-hours owed and delivered again while the log moves: every ``every_s``
    at most, and never more than ``1 / OWED_SHARE`` of the time (the longer the log, the
    less often). They need its records, read here and folded in a thread, so no query
    waits on them."""
    while True:
        seq = model.state.seq
        if not (ready() and seq > 0 and (model.owed is None or model.owed.seq < seq)):
            await asyncio.sleep(min(1.0, every_s))
            continue
        began = model.clock.monotonic()
        try:
            records = await events.read(1, seq)
            now = model.clock.now()
            model.owed = await asyncio.to_thread(owed_report, records, now, window_ns)
        except Exception:
            log.exception("computing GPU-hours owed and delivered failed; again later")
        took = model.clock.monotonic() - began
        await asyncio.sleep(max(every_s, OWED_SHARE * took))


async def run_beside(
    fold: Coroutine[Any, Any, None], dashboard: Dashboard, sock: socket.socket, events: EventLog
) -> None:
    """Run ``fold`` (the view's) with the dashboard and its owed report beside it, in the
    same event loop; both end when it ends or is cancelled."""
    beside = [
        asyncio.create_task(serve(dashboard, sock)),
        asyncio.create_task(keep_owed(events, dashboard.model, dashboard.ready)),
    ]
    for task in beside:
        task.add_done_callback(_said)
    try:
        await fold
    finally:
        for task in beside:
            task.cancel()
        for task in beside:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


def _said(task: "asyncio.Task[None]") -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("the dashboard stopped: %r", task.exception())
