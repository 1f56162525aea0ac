"""``allot replay`` and ``allot log export|import``: the log as evidence."""

import argparse
import contextlib
import datetime
import getpass
import json
import sys
import time
from collections.abc import AsyncIterator, Iterable, Iterator
from pathlib import Path
from typing import Any

import msgspec

from allot.bus.eventlog import EventLog, Record, new_meta
from allot.bus.log import Log
from allot.bus.snapshots import BASE, SnapshotUnreadable, read_snapshot
from allot.bus.snapshots import OBJECT as SNAPSHOT_OBJECT
from allot.client import progress, render
from allot.client.logfile import LogFileError, export_log, import_log, read_log
from allot.core.fairshare import standings
from allot.core.planning import DEFAULT_POLICY
from allot.core.replay import Base, state_at, verify
from allot.core.snapshot import SnapshotError, decode_snapshot
from allot.proto import msgids
from allot.proto.events import EventQuarantined
from allot.proto.limits import MAX_REASON
from allot.proto.subjects import PLAN_EVENTS, SNAPSHOT_BUCKET
from allot.services.runtime import code_version
from allot.services.snapshots import ArchivedLog


async def all_records(events: Log) -> AsyncIterator[Record]:
    """Every record of the stream, from the first to the last there is now."""
    last = await events.last_seq()
    if last < await events.first_seq():  # nothing, or all of it archived
        return
    async with contextlib.aclosing(events.follow(1)) as records:
        async for record in records:
            yield record
            if record.seq >= last:
                return


async def cmd_replay(args: argparse.Namespace, connect: Any) -> int:
    try:
        if args.log:
            path = Path(args.log)
            return _replay(args, lambda prefix="": read_log(path, prefix), None, [], None)
        snapshots: list[tuple[str, bytes]] = []
        async with await connect(args) as client:
            base = await _archived_base(client.events)
            if args.verify:
                snapshots = await _stored_snapshots(client.events)
            with progress.shown("reading the log", await client.events.last_seq()) as report:
                records = []
                async for record in all_records(client.events):
                    records.append(record)
                    if report is not None:
                        report(len(records), None)

        def every(prefix: str = "") -> Iterator[Record]:
            return (r for r in records if r.subject.startswith(prefix))

        return _replay(args, every, len(records), snapshots, base)
    except (LogFileError, ArchivedLog) as error:
        print(f"allot: {error}", file=sys.stderr)
        return 2


async def _archived_base(events: EventLog) -> Base | None:
    """Where the start of the log was archived, the state the rest begins from (a fresh
    copy each call); None where nothing was."""
    first = await events.first_seq()
    if first <= 1:
        return None
    version = code_version()
    try:
        data = await read_snapshot(events.js, BASE)
        if data is None:
            raise SnapshotError("there is none")
        if (seq := decode_snapshot(data, version).seq) + 1 < first:  # it would skip events
            raise SnapshotError(f"it is at sequence {seq}")
    except (SnapshotError, SnapshotUnreadable) as why:
        raise ArchivedLog(
            f"the log before sequence {first} was archived, and its base snapshot "
            f"{SNAPSHOT_BUCKET}/{BASE} cannot be used: {why}"
        ) from None
    return lambda: decode_snapshot(data, version)


async def _stored_snapshots(events: EventLog) -> list[tuple[str, bytes]]:
    """The snapshots a service would start from, to be checked against the log; one that
    cannot be read whole is reported (and no service starts from it)."""
    name = f"{SNAPSHOT_BUCKET}/{SNAPSHOT_OBJECT}"
    try:
        data = await read_snapshot(events.js)
    except SnapshotUnreadable as why:
        print(f"warning: snapshot {name} cannot be read: {why}", file=sys.stderr)
        return []
    return [] if data is None else [(name, data)]


class _Watched:
    """The records ``state_at`` reads, and what it saw of them: whether it read to the
    end, the last sequence and the first and last times."""

    def __init__(self, records: Iterable[Record]):
        self.records = records
        self.to_the_end = False
        self.last_seq = 0
        self.first_at: int | None = None
        self.last_at: int | None = None

    def __iter__(self) -> Iterator[Record]:
        for record in self.records:
            self.last_seq = record.seq
            if record.event is not None:
                at = record.event.meta.at
                self.first_at = at if self.first_at is None else min(self.first_at, at)
                self.last_at = at if self.last_at is None else max(self.last_at, at)
            yield record
        self.to_the_end = True


def _outside(watched: _Watched, seq: int | None, at: int | None, given: str) -> str | None:
    """Why ``--at`` names no moment of the log (state_at would stop at its end), or None."""
    if watched.to_the_end and watched.last_seq == 0:
        return f"--at {given}: the log is empty"
    if seq is not None and seq < 1:
        return f"--at {given}: sequences start at 1"
    if seq is not None and watched.to_the_end and seq > watched.last_seq:
        return f"--at {given}: past the end of the log, whose last sequence is {watched.last_seq}"
    first, last = watched.first_at, watched.last_at
    if at is not None and first is not None and at < first:
        return f"--at {given}: before the first event of the log (at {render.when(first)})"
    if at is not None and watched.to_the_end and last is not None and at > last:
        return f"--at {given}: after the last event of the log (at {render.when(last)})"
    return None


def _replay(
    args: argparse.Namespace,
    records: Any,
    total: int | None,
    snapshots: list[tuple[str, bytes]],
    base: Base | None,
) -> int:
    """``total``: how many records there are, where known (for the progress bar);
    ``snapshots``: (name, bytes) of those to check with ``--verify``; ``base``: the state
    an archived log begins from."""
    if args.verify:
        return _verify(args, records, total, snapshots, base)
    seq, at = _moment(args.at)
    watched = _Watched(records())
    state, last = state_at(watched, seq=seq, at=at, reread=records, base=base)
    if why := _outside(watched, seq, at, args.at):
        print(f"allot: {why}", file=sys.stderr)
        return 2
    now = at if at is not None else last
    ranked = standings(state, now, DEFAULT_POLICY.fair_share)
    rows = render.queue_rows(state, now)
    budgets = render.budget_rows(state, now, 7 * 24 * 3600 * 10**9)
    view = {
        "seq": state.seq,
        "at": now,
        "nodes": [render.node_view(n, state) for _, n in sorted(state.nodes.items())],
        "jobs": [render.job_view(j) for j in state.jobs.values() if not j.status.terminal],
        "queue": rows,
        "ranks": {a: s.rank for a, s in sorted(ranked.items())},
        "budgets": budgets,
    }
    text = "\n\n".join(
        [
            f"the cluster at sequence {state.seq} ({render.when(now)})",
            render.nodes_table(
                state.nodes,
                {n: render.why_unavailable(node, state) for n, node in state.nodes.items()},
            ),
            render.jobs_table([j for j in state.jobs.values() if not j.status.terminal]),
            "queue:\n" + render.queue_table(rows),
            "accounts:\n" + render.budget_table(budgets),
        ]
    )
    if args.json:
        print(json.dumps(view, indent=2, sort_keys=True, default=str))
    else:
        print(text)
    return 0


def _moment(text: str | None) -> tuple[int | None, int | None]:
    """``--at``: a sequence number, or an ISO 8601 time (UTC unless it says otherwise)."""
    if text is None:
        return None, None
    if text.isdigit():
        return int(text), None
    try:
        moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise SystemExit(
            f"allot: --at {text!r}: give a sequence number or a time such as 2026-11-30T14:05:00Z"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return None, int(moment.timestamp() * 1e9)


def _verify(
    args: argparse.Namespace,
    records: Any,
    total: int | None,
    snapshots: list[tuple[str, bytes]],
    base: Base | None,
) -> int:
    with progress.shown("verifying: events folded", total) as report:
        plans = records(PLAN_EVENTS[:-1])
        result = verify(
            plans,
            records(),
            code_version(),
            reread=records,
            progress=report,
            snapshots=snapshots,
            base=base,
        )
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if args.json:
        print(json.dumps(msgspec.to_builtins(result), indent=2, sort_keys=True))
    else:
        for divergence in result.divergences:
            print(
                f"DIVERGES at sequence {divergence.seq} (jobs: {', '.join(divergence.jobs) or '-'})"
            )
            for line in divergence.diff:
                print(f"  {line}")
        verdict = f"{len(result.divergences)} diverge" if result.divergences else "all match"
        checked = f", {result.snapshots} snapshot(s) checked" if snapshots else ""
        print(f"{result.events} events folded, {result.plans} plans recomputed{checked}: {verdict}")
    return 1 if result.divergences else 0


async def cmd_log_export(args: argparse.Namespace, connect: Any) -> int:
    async with await connect(args) as client:
        with progress.shown(f"exporting to {args.file}", await client.events.last_seq()) as report:
            count = await export_log(all_records(client.events), Path(args.file), report)
    print(f"{count} messages written to {args.file}", file=sys.stderr)
    return 0


async def cmd_log_quarantine(args: argparse.Namespace, connect: Any) -> int:
    """Mark one event as not to be folded: every service folds the log again without it."""
    if len(args.reason) > MAX_REASON or not args.reason.strip():
        print(f"allot: --reason: say why, in 1 to {MAX_REASON} characters", file=sys.stderr)
        return 2
    async with await connect(args) as client:
        first, last = await client.events.first_seq(), await client.events.last_seq()
        if not first <= args.seq <= last:
            archived = " (those before were archived)" if first > 1 else ""
            print(
                f"allot: SEQ={args.seq}: the log holds sequences {first} to {last}{archived}",
                file=sys.stderr,
            )
            return 2
        [record] = await client.events.read(args.seq, args.seq)
        event = EventQuarantined(
            meta=new_meta("operator", time.time_ns()),
            seq=args.seq,
            reason=args.reason,
            by=getpass.getuser(),
        )
        appended = await client.events.append(event, msg_id=msgids.quarantine(args.seq))
    if args.json:
        print(json.dumps({"seq": args.seq, "type": record.type, "quarantined_at": appended.seq}))
    else:
        print(
            f"{record.type} at sequence {args.seq} quarantined at {appended.seq}: "
            "every service folds the log again without it"
        )
    return 0


async def cmd_log_import(args: argparse.Namespace, connect: Any) -> int:
    async with await connect(args) as client:
        try:
            with progress.shown(f"importing {args.file}") as report:
                count = await import_log(Path(args.file), client.events, report)
        except LogFileError as error:
            print(f"allot: {error}; nothing was imported", file=sys.stderr)
            return 2
    print(f"{count} messages imported from {args.file}", file=sys.stderr)
    return 0
