"""``allot log archive --upto SEQ --to FILE``: the start of the log to a file, then off the
stream, so the live log stays as long as what services need (docs/adr/0024).

The records up to SEQ are written to FILE in ``allot log export``'s format and then
purged from the stream, which keeps SEQ+1 on. What services start from instead is a
snapshot, so it refuses unless the stored snapshot is one this code trusts, at or after
SEQ, and equal to the fold of the log up to it: it folds the log to the snapshot's
sequence to check, as ``allot replay --verify`` does. It stores the state at SEQ as the
bucket's ``base``: a service without a newer trusted snapshot, and replay of what is
kept, begin there. Nothing is purged unless FILE was written whole and the base stored.
"""

import argparse
import contextlib
import sys
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

from allot.bus.eventlog import EventLog, Record
from allot.bus.snapshots import (
    BASE,
    OBJECT,
    SnapshotUnreadable,
    read_snapshot,
    write_snapshot,
)
from allot.client import progress
from allot.client.logfile import export_log
from allot.core import State, apply_record, refold
from allot.core.snapshot import (
    SnapshotError,
    decode_snapshot,
    differences,
    encode_snapshot,
    encode_state,
    read_header,
)
from allot.proto.events import EventQuarantined
from allot.proto.subjects import SNAPSHOT_BUCKET
from allot.services.runtime import code_version


class ArchiveRefused(Exception):
    """Why nothing was archived."""


async def cmd_log_archive(args: argparse.Namespace, connect: Any) -> int:
    async with await connect(args) as client:
        try:
            first, archived = await archive(client.events, args.upto, Path(args.to))
        except ArchiveRefused as why:
            print(f"allot: {why}; nothing was archived", file=sys.stderr)
            return 2
    print(
        f"sequences {first} to {args.upto} ({archived} messages) written to {args.to} and "
        f"purged from the log, which now begins at {args.upto + 1}",
        file=sys.stderr,
    )
    return 0


async def archive(events: EventLog, upto: int, path: Path) -> tuple[int, int]:
    """Archive the log up to ``upto`` into ``path``: (the first sequence archived, how
    many messages)."""
    version = code_version()
    first, last = await events.first_seq(), await events.last_seq()
    if not first <= upto <= last:
        held = f"sequences {first} to {last}" if last >= first else "nothing"
        raise ArchiveRefused(f"--upto {upto}: the log holds {held}")
    snapshot = await _trusted(events, OBJECT, version)
    if snapshot is None:
        raise ArchiveRefused(
            "no snapshot is stored: services would have nothing to start from (the planner "
            "stores one once caught up, every --snapshot-every events)"
        )
    if snapshot.seq < upto:
        raise ArchiveRefused(
            f"--upto {upto}: the latest snapshot is at sequence {snapshot.seq}; archive up "
            "to it, or after the planner has stored a later one"
        )
    if snapshot.seq > last:  # a log begun again: checking it would wait for what may not come
        raise ArchiveRefused(
            f"snapshot {SNAPSHOT_BUCKET}/{OBJECT} is at sequence {snapshot.seq}, past the end "
            f"of the log ({last}): no service starts from it"
        )

    def base() -> State:
        return State() if base_data is None else decode_snapshot(base_data, version)

    base_data = await _base_bytes(events, first, version)
    state = base()
    at_upto: list[bytes] = []  # the state at ``upto``, as a snapshot
    quarantined_at_upto: dict[int, str] = {}

    async def archived() -> AsyncGenerator[Record, None]:
        nonlocal state
        async with contextlib.aclosing(events.follow(first)) as records:
            async for record in records:
                if record.seq > state.seq:
                    apply_record(state, record)
                if state.refold_due:
                    state = refold(state, await events.read(first, state.seq), base())
                if record.seq <= upto:
                    yield record
                if record.seq == upto:
                    at_upto.append(encode_snapshot(state, version))
                    quarantined_at_upto.update(state.quarantined)
                if record.seq >= snapshot.seq:
                    return

    partial = path.with_name(path.name + ".partial")
    try:
        with progress.shown(f"archiving to {path}", upto - first + 1) as report:
            async with contextlib.aclosing(archived()) as records:
                # It folds on to the snapshot's sequence, to check it, yielding nothing more.
                count = await export_log(records, partial, report)
        if encode_state(state) != (stored := bytes(read_header(snapshot.data).state)):
            raise ArchiveRefused(
                f"snapshot {SNAPSHOT_BUCKET}/{OBJECT} at sequence {snapshot.seq} is not the "
                f"fold of the log up to it (it differs in: "
                f"{', '.join(differences(stored, encode_state(state)))})"
            )
        late = [q for q in state.quarantined if q <= upto and q not in quarantined_at_upto]
        # Quarantines appended after the snapshot (or while this ran) were not folded here:
        # read last, just before the purge, so that only a moment is left unchecked.
        for record in await events.read(snapshot.seq + 1, await events.last_seq()):
            event = record.event
            if isinstance(event, EventQuarantined) and event.seq <= upto:
                late += [event.seq] if event.seq not in quarantined_at_upto else []
        if late:
            raise ArchiveRefused(
                f"--upto {upto}: a later quarantine names sequence {late[0]}; the state "
                "archived would still hold it. Archive up to before it"
            )
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)
    description = f"the log folded up to sequence {upto}, archived before it"
    await write_snapshot(events.js, at_upto[0], description, BASE)
    await events.purge_before(upto + 1)
    return first, count


class _Stored:
    def __init__(self, seq: int, data: bytes):
        self.seq, self.data = seq, data


async def _trusted(events: EventLog, name: str, version: str) -> _Stored | None:
    """The stored snapshot ``name``, if this code may start from it; None if there is
    none; ``ArchiveRefused`` if there is one it may not."""
    try:
        data = await read_snapshot(events.js, name)
        if data is None:
            return None
        return _Stored(decode_snapshot(data, version).seq, data)
    except (SnapshotUnreadable, SnapshotError) as why:
        raise ArchiveRefused(
            f"snapshot {SNAPSHOT_BUCKET}/{name} cannot be trusted: {why}"
        ) from None


async def _base_bytes(events: EventLog, first: int, version: str) -> bytes | None:
    """Where the log was archived before, the state it begins from; None where not."""
    if first <= 1:
        return None
    base = await _trusted(events, BASE, version)
    if base is None or base.seq + 1 < first:
        raise ArchiveRefused(
            f"the log before sequence {first} was archived, and no snapshot of this code "
            "holds the state there"
        )
    return base.data
