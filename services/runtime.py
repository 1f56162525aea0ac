"""What every service process shares: connecting, folding the log, stopping on a signal."""

import argparse
import asyncio
import contextlib
import gc
import hashlib
import logging
import math
import os
import signal
import time
from collections.abc import Awaitable, Callable, Coroutine
from importlib.metadata import version
from pathlib import Path
from typing import Any

import allot.core
import allot.proto
from allot.bus import tracing
from allot.bus.eventlog import EventLog, Record, new_meta
from allot.bus.identity import IdentityError, load
from allot.bus.tls import TlsError, from_environment
from allot.bus.tracing import JobTraces
from allot.bus.urls import redacted
from allot.core import State, apply_record, pass_over, refold
from allot.proto.events import Event, JobEvent, JobSpec, Meta
from allot.services import health
from allot.services.snapshots import archived_base, cover_archived, start_from_snapshot

log = logging.getLogger("allot")
GC_THRESHOLD = 50_000  # allocations between two collections of the youngest objects
STARTED = time.monotonic()  # about when this process started: what a restart costs is since


async def follow_state(
    events: EventLog,
    state: State,
    on_caught_up: Callable[[], Awaitable[None]],
    tick_s: float | None = None,
    note: Callable[[Record], None] | None = None,
    fold_record: Callable[[State, Record], None] | None = None,
    snapshot: bool = False,
    reads: frozenset[str] | None = None,
) -> None:
    """Fold the log into ``state`` forever; call ``on_caught_up`` whenever everything
    written so far has been folded, so decisions never rest on a half-read log. What
    arrived while a call ran is folded in full before the next one: a burst of events
    costs one decision, not one for each of its events. With ``tick_s``, also every
    ``tick_s`` seconds while the log is quiet: for decisions that time alone makes due
    (aging, grace periods, runtimes). Calls never overlap. A call that fails (the bus too
    slow to take an event) is logged; the decision is made again on the next event or tick,
    from the log as it then is. ``note`` is given each record once it is folded;
    ``fold_record`` folds it instead of ``fold`` (it must call ``apply_record``). With
    ``snapshot``, a ``state`` with nothing folded yet starts from the stored snapshot, if
    one can be trusted (``allot.services.snapshots``), and only the log after it is folded.
    Where the start of the log was archived, a state that does not reach what is left
    starts from the state the archive left, or the service stops saying why. With
    ``reads``, only records of those event types are decoded and folded; the others are
    passed over (``allot.core.pass_over``): for a service whose decisions read no more."""
    one_at_a_time = asyncio.Lock()
    first = True
    if snapshot and state.seq == 0:
        await start_from_snapshot(events, state, code_version())
    await cover_archived(events, state, code_version())
    started_at = state.seq

    async def caught_up() -> None:
        nonlocal first
        if first:  # what a restart costs, and what to measure it by
            first = False
            log.info("caught up at sequence %d, %.2f s after starting, from sequence %d",
                     state.seq, time.monotonic() - STARTED, started_at + 1)  # fmt: skip
        async with one_at_a_time:
            try:
                await on_caught_up()
            except Exception:
                log.exception("acting on the log at sequence %d failed; again later", state.seq)
            else:
                health.caught_up(state.seq)

    async def tick(period: float) -> None:
        while True:
            await asyncio.sleep(period)
            with contextlib.suppress(Exception):  # the follow loop reports real trouble
                if await events.last_seq() <= state.seq:
                    await caught_up()

    ticker = asyncio.create_task(tick(tick_s)) if tick_s is not None else None
    try:
        if await events.last_seq() <= state.seq:
            await caught_up()
        async with contextlib.aclosing(events.follow(state.seq + 1, reads=reads)) as records:
            async for record in records:
                if reads is None:
                    (fold_record or fold)(state, record)
                elif record.type in reads:
                    # Not logged: a partial fold ignores what a whole one may not (a drain
                    # seen without the jobs that emptied it); whole folds log what is wrong.
                    (fold_record or apply_record)(state, record)
                else:
                    pass_over(state, record)
                if note is not None:
                    note(record)
                if state.refold_due:
                    await _refold(events, state)
                if record.backlog == 0:  # counts what reached this process unfolded too
                    await caught_up()
    finally:
        if ticker is not None:
            ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await ticker


def event_span(
    service: str, state: State, traces: JobTraces, event: Event
) -> contextlib.AbstractContextManager[object]:
    """The span to append ``event`` in: for an event about a job, a span of the job's trace
    named for the service and the event (``preemptor.StopRequested``), with what an
    operator filters on; for any other, none of its own."""
    if not isinstance(event, JobEvent):
        return contextlib.nullcontext()
    name = f"{service}.{event.__struct_config__.tag}"
    return tracing.job_span(traces, event.job_id, name, job_attributes(state, event))


def job_attributes(state: State, event: JobEvent) -> dict[str, str | int | bool]:
    """The span attributes of an event about a job: the job's and the event's own."""
    job = state.jobs.get(event.job_id)
    attributes = spec_attributes(event.job_id, job.spec if job is not None else None)
    for field, name in _EVENT_ATTRIBUTES:
        value = getattr(event, field, None)
        if isinstance(value, str | int | bool) and value != "":
            attributes[name] = value
    return attributes


def spec_attributes(job_id: str, spec: JobSpec | None) -> dict[str, str | int | bool]:
    attributes: dict[str, str | int | bool] = {"allot.job.id": job_id}
    if spec is not None:
        attributes |= {"allot.account": spec.account, "allot.tier": spec.tier,
                       "allot.gpus": spec.gpus}  # fmt: skip
    return attributes


_EVENT_ATTRIBUTES = [
    ("node_id", "allot.node"),
    ("attempt", "allot.attempt"),
    ("reason", "allot.reason"),
    ("exit_code", "allot.exit_code"),
    ("kind", "allot.stop.kind"),
    ("lost_gpu_ms", "allot.lost_gpu_ms"),
]


def fold(state: State, record: Record) -> None:
    """Fold one record; an event the fold ignored is logged once, here, as it is folded."""
    ignored = state.ignored_count
    apply_record(state, record)
    if state.ignored_count > ignored:
        why = state.ignored[-1]
        log.warning("ignored %s at sequence %d: %s", why.type, why.seq, why.reason[:500])


async def _refold(events: EventLog, state: State) -> None:
    """A quarantine was folded: fold the log up to it again without the quarantined
    events (``allot.core.refold``), and let every view of the old state go."""
    log.warning("sequence %d quarantines %s: folding the log again", state.seq, state.quarantined)
    base = await archived_base(events, code_version())
    records = await events.read(1 if base is None else base.seq + 1, state.seq)
    state.become(refold(state, records, base))
    log.info("folded again up to sequence %d", state.seq)


class Folded:
    """How far the fold of ``state`` has come, for a command handler waiting to see its
    own append (or another's) folded: announced each time the fold has caught up."""

    def __init__(self, state: State):
        self.state = state
        self._caught_up = asyncio.Condition()

    async def announce(self) -> None:
        async with self._caught_up:
            self._caught_up.notify_all()

    async def reached(self, seq: int) -> None:
        """Once the fold has caught up at ``seq`` or past it."""
        async with self._caught_up:
            await self._caught_up.wait_for(lambda: self.state.seq >= seq)


class Clock:
    """The clocks, read only here, outside the pure core."""

    def now(self) -> int:
        """Wall clock, UTC nanoseconds: what events record."""
        return time.time_ns()

    def monotonic(self) -> float:
        """Seconds that never jump: what timeouts measure."""
        return time.monotonic()


def code_version() -> str:
    """The package version and a digest of the sources that decide (the core and the
    contracts), so replay can tell whether a plan was made by the same decision code."""
    digest = hashlib.sha256()
    for name, source in decision_sources():
        digest.update(name.encode())
        digest.update(source.read_bytes())
    return f"{version('allot')}+{digest.hexdigest()[:12]}"


def decision_sources() -> list[tuple[str, Path]]:
    """Every source file of the core and the contracts, subpackages included, by its path
    within its package."""
    sources = []
    for package in (allot.core, allot.proto):
        folder = Path(package.__file__ or "").parent
        for source in sorted(folder.rglob("*.py")):
            sources.append((f"{package.__name__}/{source.relative_to(folder)}", source))
    return sources


def stamp(producer: str, clock: Clock) -> Meta:
    return new_meta(producer, clock.now())


DAY_S = 86_400.0


def seconds(low: float, high: float = DAY_S) -> Callable[[str], float]:
    """An argument's type: a number of seconds from ``low`` to ``high``. Anything else is
    a usage error naming the value and what is accepted, before the service starts (a NaN
    or a negative period would otherwise spin or stall a loop)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not low <= value <= high:  # NaN is not either
            raise argparse.ArgumentTypeError(
                f"{text[:40]!r}: a number of seconds from {low:g} to {high:g}"
            )
        return value

    return parse


def nats_url_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--nats-url",
        default=os.environ.get("ALLOT_NATS_URL", "nats://127.0.0.1:4222"),
        help="NATS server (default: $ALLOT_NATS_URL or nats://127.0.0.1:4222)",
    )


def connection_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """What every service is told of where to connect, and as whom."""
    nats_url_argument(parser)
    parser.add_argument(
        "--identity",
        "--creds",
        type=Path,
        default=os.environ.get("ALLOT_IDENTITY"),
        help="the NATS identity file to connect as (default: $ALLOT_IDENTITY; none: a "
        "server without authorization)",
    )
    parser.add_argument(
        "--health-port",
        type=int,
        help="answer GET /livez and /readyz on this port (docs/adr/0025; default: not at all)",
    )
    parser.add_argument(
        "--health-host",
        default="127.0.0.1",
        help="the address to answer health checks on (default 127.0.0.1: this machine only)",
    )
    return parser


def run_service(
    name: str,
    parser: argparse.ArgumentParser,
    serve: Callable[[argparse.Namespace, EventLog], Coroutine[Any, Any, None]],
) -> None:
    """Parse arguments, connect, run ``serve`` until SIGTERM/SIGINT, then close cleanly."""
    args = connection_arguments(parser).parse_args()
    # A service's fold makes a few dozen objects per submission and keeps most of them: at
    # the default threshold (700) the collector ran every few submissions, re-examining
    # what had just been kept: a quarter of the fold's time in a burst. Garbage with cycles
    # is rare here; it still goes, a little later.
    gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])
    logging.basicConfig(
        level=os.environ.get("ALLOT_LOG_LEVEL", "INFO"),
        format=f"%(asctime)s {name} %(levelname)s %(message)s",
    )

    try:
        identity = load(args.identity) if args.identity else None
        tls = from_environment()
    except (IdentityError, TlsError) as error:
        parser.exit(2, f"{parser.prog}: {error}\n")
    if tracing.configure(name):
        log.info("exporting spans over OTLP (OTEL_EXPORTER_OTLP_ENDPOINT and friends)")

    async def main() -> None:
        checks = health.Health()
        if args.health_port is not None:  # answering before the connection, which may wait
            try:
                server = await health.serve(checks, args.health_host, args.health_port)
            except OSError as error:
                parser.exit(2, f"{parser.prog}: --health-port {args.health_port}: {error}\n")
            bound = server.sockets[0].getsockname()[1]  # the port chosen, where 0 was asked
            log.info("health checks on http://%s:%d/readyz", args.health_host, bound)
        events = await EventLog.connect(
            args.nats_url, name=f"allot-{name}", identity=identity, tls=tls
        )
        checks.connected = lambda: events.nc.is_connected
        health.reporting_to(checks)
        task = asyncio.create_task(serve(args, events))
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, task.cancel)
        who = f" as {identity.name}" if identity else ""
        log.info("started, NATS at %s%s", redacted(args.nats_url), who)
        with contextlib.suppress(asyncio.CancelledError):
            await task
        with contextlib.suppress(Exception):
            await events.close()
        log.info("stopped")

    asyncio.run(main())
