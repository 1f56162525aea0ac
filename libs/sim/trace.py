"""Workload traces for the simulator, in one canonical form.

Canonical CSV, one job per row, with a header::

    job_id,submit_s,duration_s,gpus,account[,tier,resumable,min_runtime_s,max_runtime_s,
    checkpoint_interval_s,workers]

``submit_s`` counts from the trace's start; ``gpus`` is per worker. The optional columns may
be left out or left empty; what a trace lacks is filled by a ``Fill`` policy, seeded and
printed with the results, because a simulation is only as honest as what it assumes:

- ``tier``: jobs of at most ``debug_gpus`` GPUs that run at most ``debug_s`` are
  interactive (debugging, notebooks); the rest batch.
- ``resumable``: a seeded share of the batch jobs checkpoint, every
  ``checkpoint_interval_s``.
- ``max_runtime_s``: the duration rounded up to whole hours, as users declare it.
- ``min_runtime_s``: 0 (no job asks for protection), unless the fill is the Ai2 runtime
  contract (``Fill.min_runtimes``, R13): then every job declares one, in whole hours and at
  most 8 h, like its maximum. A job that cannot resume loses all its work when stopped, so
  it asks to be protected for all of it: its maximum runtime, capped. A job that can
  resume needs protection only long enough to make progress past a restart, and the
  longer it asks for the more of its budget funding it takes: it asks for a seeded whole
  number of hours from 1 to that cap, drawn uniformly.

Node failures, where a trace has them, are outages of the simulated cluster's nodes: a
canonical node-events CSV (``node,down_s[,up_s]``: the node's index in the cluster from 0,
when it went down and, unless it never came back, when it was back), or, in an exported
Allot log, each ``NodeLost`` until the node registered again.

Loaders: ``allot-log`` (an exported Allot log: what a what-if on real history replays),
``canonical``, ``philly`` (Microsoft Philly as processed for Pollux: submit time,
duration, GPUs, virtual cluster as the account) and ``alibaba`` (the 2023 GPU-sharing pods:
creation and deletion times, whole GPUs, QoS ``BE`` as best-effort; pods without a
deletion time are left out).
"""

import csv
import datetime
import itertools
import math
import random
from collections.abc import Iterable
from pathlib import Path

import msgspec

from allot.client.logfile import LogFileError, read_log
from allot.core.arrays import array_problems, indices, task_id
from allot.core.wellformed import ID_RULE
from allot.proto.events import (
    ArraySubmitted,
    Event,
    JobExited,
    JobStarted,
    JobSubmitted,
    NodeLost,
    NodeRegistered,
    submissions,
)
from allot.proto.subjects import is_id

HOUR_S = 3600


class TraceJob(msgspec.Struct, frozen=True, kw_only=True):
    job_id: str
    submit_s: float
    duration_s: float
    gpus: int
    account: str
    tier: str | None = None
    resumable: bool | None = None
    min_runtime_s: float | None = None
    max_runtime_s: float | None = None
    checkpoint_interval_s: float | None = None
    workers: int = 1


class NodeOutage(msgspec.Struct, frozen=True, kw_only=True):
    """Node ``node`` of the cluster (its index, from 0) down from ``down_s`` until ``up_s``
    (None: for good)."""

    node: int
    down_s: float
    up_s: float | None = None


class Fill(msgspec.Struct, frozen=True, kw_only=True):
    """How columns a trace lacks are filled; seeded, and shown with every result."""

    seed: int = 1
    debug_gpus: int = 2
    debug_s: float = 15 * 60
    resumable_share: float = 0.6
    checkpoint_interval_s: float = 30 * 60
    min_runtimes: bool = False  # every job declares a minimum runtime (the Ai2 contract)
    min_runtime_cap_s: float = 8 * HOUR_S  # the most it may declare (R13)

    def describe(self) -> str:
        described = (
            f"filled (seed {self.seed}): jobs of <= {self.debug_gpus} GPUs running <= "
            f"{self.debug_s / 60:g} min are interactive; {self.resumable_share:.0%} of batch "
            f"jobs resumable, checkpointing every {self.checkpoint_interval_s / 60:g} min; "
            f"max_runtime = duration rounded up to the hour"
        )
        if self.min_runtimes:
            cap = f"{self.min_runtime_cap_s / HOUR_S:g} h"
            described += (
                f"; min_runtime = max_runtime capped at {cap} for jobs that cannot resume, "
                f"a seeded whole number of hours from 1 to that for jobs that can"
            )
        return described


class TraceError(Exception):
    """A trace that cannot be read; the message names the file, the row and the field."""


def filled(jobs: Iterable[TraceJob], fill: Fill) -> list[TraceJob]:
    """The jobs sorted by submission (then id), every optional column given a value."""
    rng = random.Random(fill.seed)
    # Minimum runtimes draw from a stream of their own: filling them leaves every other
    # column's draws, and so every run without them, as it was.
    contract = random.Random(f"{fill.seed}/min_runtime")
    out = []
    for job in sorted(jobs, key=lambda j: (j.submit_s, j.job_id)):
        debug = job.gpus * job.workers <= fill.debug_gpus and job.duration_s <= fill.debug_s
        tier = job.tier or ("interactive" if debug else "batch")
        draw = rng.random()  # drawn for every job, so one column's fill leaves others alone
        resumable = (
            job.resumable
            if job.resumable is not None
            else (tier != "interactive" and draw < fill.resumable_share)
        )
        hours = max(1, -(-int(job.duration_s) // HOUR_S))
        max_runtime_s = job.max_runtime_s or float(hours * HOUR_S)
        min_runtime_s = job.min_runtime_s
        if fill.min_runtimes:
            asked = _min_runtime(max_runtime_s, resumable, contract.random(), fill)
            min_runtime_s = asked if min_runtime_s is None else min_runtime_s
        out.append(
            msgspec.structs.replace(
                job,
                tier=tier,
                resumable=resumable,
                min_runtime_s=min_runtime_s if min_runtime_s is not None else 0.0,
                max_runtime_s=max_runtime_s,
                checkpoint_interval_s=job.checkpoint_interval_s
                or (fill.checkpoint_interval_s if resumable else None),
            )
        )
    return out


def _min_runtime(max_runtime_s: float, resumable: bool, draw: float, fill: Fill) -> float:
    """What a job declares under the Ai2 contract (see the module docstring): never more
    than its own maximum runtime, which intake would refuse."""
    cap_h = max(1, int(min(max_runtime_s, fill.min_runtime_cap_s) // HOUR_S))
    hours = 1 + int(draw * cap_h) if resumable else cap_h
    return min(float(hours * HOUR_S), max_runtime_s)


def load(path: Path, fmt: str) -> list[TraceJob]:
    loaders = {
        "canonical": read_canonical,
        "philly": read_philly,
        "alibaba": read_alibaba,
        "allot-log": read_allot_log,
    }
    if fmt not in loaders:
        raise TraceError(f"--format {fmt!r}: one of {', '.join(sorted(loaders))}")
    return loaders[fmt](path)


def load_trace(path: Path, fmt: str) -> tuple[list[TraceJob], list[NodeOutage]]:
    """The jobs of a trace and the node failures it carries (only an exported Allot log
    has them), reading it once."""
    if fmt != "allot-log":
        return load(path, fmt), []
    events = _log_events(path)
    return _log_jobs(events), _log_outages(events)


def read_outages(path: Path) -> list[NodeOutage]:
    """A canonical node-events CSV, sorted by node and time (``check_outages`` says
    whether they fit a cluster)."""
    outages = []
    for line, row in _rows(path, {"node", "down_s"}):
        node = _number(path, line, row, "node")
        if node != int(node):
            raise TraceError(f"{path}:{line}: node={row['node']!r} is not a node index (0, 1, ...)")
        down, up = _number(path, line, row, "down_s"), _optional(path, line, row, "up_s")
        if up is not None and up <= down:
            raise TraceError(f"{path}:{line}: up_s={up:g} must be after down_s={down:g}")
        outages.append(NodeOutage(node=int(node), down_s=down, up_s=up))
    return sorted(outages, key=lambda o: (o.node, o.down_s))


def check_outages(outages: list[NodeOutage], nodes: int) -> None:
    """Every outage names a node of a cluster of ``nodes``, and a node goes down only
    once it is up again."""
    for outage in outages:
        if not 0 <= outage.node < nodes:
            raise TraceError(
                f"node events: node={outage.node} is not in a cluster of {nodes} nodes (0 to "
                f"{nodes - 1}); --cluster needs at least {outage.node + 1}"
            )
    ordered = sorted(outages, key=lambda o: (o.node, o.down_s))
    for before, after in itertools.pairwise(ordered):
        if before.node == after.node and (before.up_s is None or after.down_s < before.up_s):
            raise TraceError(
                f"node events: node {after.node} goes down at down_s={after.down_s:g} while "
                f"still down since down_s={before.down_s:g}"
            )


def _rows(path: Path, required: set[str]) -> Iterable[tuple[int, dict[str, str]]]:
    try:
        with open(path, newline="") as file:
            reader = csv.DictReader(file)
            missing = required - set(reader.fieldnames or [])
            if missing:
                raise TraceError(f"{path}: missing columns {', '.join(sorted(missing))}")
            for number, row in enumerate(reader, start=2):
                if any((v or "").strip() for v in row.values()):
                    yield number, row
    except OSError as error:
        raise TraceError(f"{path}: {error}") from None


def _number(path: Path, line: int, row: dict[str, str], field: str) -> float:
    try:
        value = float(row[field])
    except (TypeError, ValueError):
        value = math.nan
    if not math.isfinite(value):
        raise TraceError(f"{path}:{line}: {field}={row.get(field)!r} is not a number")
    if value < 0:
        raise TraceError(f"{path}:{line}: {field}={value:g} cannot be negative")
    return value


def _optional(path: Path, line: int, row: dict[str, str], field: str) -> float | None:
    return _number(path, line, row, field) if (row.get(field) or "").strip() else None


def read_canonical(path: Path) -> list[TraceJob]:
    jobs = []
    for line, row in _rows(path, {"job_id", "submit_s", "duration_s", "gpus", "account"}):
        gpus = int(_number(path, line, row, "gpus"))
        if gpus < 1:
            raise TraceError(f"{path}:{line}: gpus={gpus} must be at least 1")
        if not is_id(row["job_id"]):
            raise TraceError(f"{path}:{line}: job_id={row['job_id']!r}: {ID_RULE}")
        tier = (row.get("tier") or "").strip() or None
        if tier not in (None, "interactive", "batch", "best-effort"):
            raise TraceError(f"{path}:{line}: tier={tier!r}: interactive, batch or best-effort")
        resumable_text = (row.get("resumable") or "").strip().lower()
        if resumable_text not in ("", "true", "false", "1", "0"):
            raise TraceError(f"{path}:{line}: resumable={resumable_text!r}: true or false")
        jobs.append(
            TraceJob(
                job_id=row["job_id"],
                submit_s=_number(path, line, row, "submit_s"),
                duration_s=_number(path, line, row, "duration_s"),
                gpus=gpus,
                account=row["account"],
                tier=tier,
                resumable=None if not resumable_text else resumable_text in ("true", "1"),
                min_runtime_s=_optional(path, line, row, "min_runtime_s"),
                max_runtime_s=_optional(path, line, row, "max_runtime_s"),
                checkpoint_interval_s=_optional(path, line, row, "checkpoint_interval_s"),
                workers=int(_optional(path, line, row, "workers") or 1),
            )
        )
    return jobs


def read_philly(path: Path) -> list[TraceJob]:
    """Submit times become seconds from the earliest one; jobs wider than 8 GPUs become
    gangs of 8-GPU workers."""
    raw = []
    for line, row in _rows(path, {"timestamp", "duration", "num_gpus", "cluster"}):
        try:
            when = datetime.datetime.fromisoformat(row["timestamp"])
        except ValueError:
            raise TraceError(f"{path}:{line}: timestamp={row['timestamp']!r}") from None
        gpus = int(_number(path, line, row, "num_gpus"))
        raw.append((when, line, gpus, _number(path, line, row, "duration"), row["cluster"]))
    if not raw:
        return []
    start = min(r[0] for r in raw)
    jobs = []
    for when, line, gpus, duration, cluster in raw:
        workers, per_worker = (gpus // 8, 8) if gpus > 8 and gpus % 8 == 0 else (1, gpus)
        jobs.append(
            TraceJob(
                job_id=f"philly-{line}",
                submit_s=(when - start).total_seconds(),
                duration_s=max(1.0, duration),
                gpus=max(1, per_worker),
                workers=workers,
                account=f"vc/{cluster}",
            )
        )
    return jobs


def read_alibaba(path: Path) -> list[TraceJob]:
    """Whole GPUs only: a pod asking for a fraction of one asks for one."""
    jobs = []
    fields = {"name", "num_gpu", "qos", "creation_time", "deletion_time"}
    for line, row in _rows(path, fields):
        if not (row.get("deletion_time") or "").strip():
            continue
        created = _number(path, line, row, "creation_time")
        deleted = _number(path, line, row, "deletion_time")
        gpus = max(1, int(_number(path, line, row, "num_gpu")))
        qos = row["qos"].strip()
        jobs.append(
            TraceJob(
                job_id=row["name"],
                submit_s=created,
                duration_s=max(1.0, deleted - created),
                gpus=gpus,
                account=f"qos/{qos.lower() or 'none'}",
                tier="best-effort" if qos == "BE" else None,
            )
        )
    return jobs


def _log_events(path: Path) -> list[Event]:
    try:
        return [record.event for record in read_log(path) if record.event is not None]
    except LogFileError as error:
        raise TraceError(str(error)) from None


def _origin(events: list[Event]) -> int:
    """The trace's time 0: the log's first submission."""
    return min((e.meta.at for event in events for e in submissions(event)), default=0)


def read_allot_log(path: Path) -> list[TraceJob]:
    return _log_jobs(_log_events(path))


def _log_jobs(events: list[Event]) -> list[TraceJob]:
    """The jobs of an exported Allot log as they were asked for, with the time they ran
    as their duration: jobs that never ran, or are still running, are left out."""
    submitted: dict[str, JobSubmitted] = {}
    started: dict[tuple[str, int], int] = {}
    ran: dict[str, float] = {}
    for event in events:
        for job in submissions(event):  # alone, or in a batch
            if isinstance(job, ArraySubmitted) and not array_problems(job.array):
                # Each task a job of its own (the simulator knows no array limit).
                for index in indices(job.array):
                    submitted[task_id(job.job_id, index)] = job
            else:
                submitted[job.job_id] = job
        if isinstance(event, JobStarted):
            started.setdefault((event.job_id, event.attempt), event.meta.at)
        elif isinstance(event, JobExited) and (event.job_id, event.attempt) in started:
            began = started.pop((event.job_id, event.attempt))
            ran[event.job_id] = ran.get(event.job_id, 0.0) + (event.meta.at - began) / 1e9
    origin = _origin(events)
    jobs = []
    for job_id, event in submitted.items():
        if job_id not in ran:
            continue
        spec = event.spec
        jobs.append(
            TraceJob(
                job_id=job_id,
                submit_s=(event.meta.at - origin) / 1e9,
                duration_s=max(ran[job_id], 0.001),
                gpus=spec.gpus,
                workers=spec.workers,
                account=spec.account,
                tier=spec.tier,
                resumable=spec.resumable,
                min_runtime_s=spec.min_runtime_ns / 1e9,
                max_runtime_s=spec.max_runtime_ns / 1e9 if spec.max_runtime_ns else None,
                checkpoint_interval_s=spec.checkpoint_interval_ns / 1e9
                if spec.checkpoint_interval_ns
                else None,
            )
        )
    return jobs


def _log_outages(events: list[Event]) -> list[NodeOutage]:
    """The node failures of an exported Allot log: each node (numbered in the order nodes
    first registered) down from when it was last heard from until it registered again.
    Times count from the log's first submission; an outage over before it is left out."""
    origin = _origin(events)
    index: dict[str, int] = {}
    registered: dict[str, int] = {}  # node -> when it last registered
    down: dict[str, int] = {}  # node -> since when it is down
    outages = []
    for event in events:
        if isinstance(event, NodeRegistered):
            index.setdefault(event.node_id, len(index))
            registered[event.node_id] = event.meta.at
            if event.node_id in down:
                outages.append(_outage(index[event.node_id], down.pop(event.node_id),
                                       event.meta.at, origin))  # fmt: skip
        elif isinstance(event, NodeLost) and event.node_id in index:
            # Last heard from, but not before it registered: a node lost before its first
            # heartbeat since is reported as last seen before that.
            since = max(event.last_seen_ns, registered[event.node_id])
            down.setdefault(event.node_id, since)
    outages += [_outage(index[node], since, None, origin) for node, since in down.items()]
    return sorted(
        (o for o in outages if o.up_s is None or o.up_s > 0), key=lambda o: (o.node, o.down_s)
    )


def _outage(node: int, down_ns: int, up_ns: int | None, origin: int) -> NodeOutage:
    return NodeOutage(
        node=node,
        down_s=max(0.0, (down_ns - origin) / 1e9),
        up_s=None if up_ns is None else (up_ns - origin) / 1e9,
    )
