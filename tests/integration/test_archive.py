"""Archiving the start of the log: written to a file and purged only when a trusted snapshot
covers it; services and replay then begin from the state it left, and agree with a fold of
the whole log."""

import asyncio
import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from allot.bus import EmbeddedNats, EventLog
from allot.bus.snapshots import BASE, drop_snapshot, read_snapshot, write_snapshot
from allot.client.archive import ArchiveRefused, archive
from allot.client.bench_replay import write_history
from allot.client.logfile import import_log, read_log
from allot.core import State, apply_record
from allot.core.snapshot import encode_snapshot, encode_state, read_header
from allot.proto.events import EventQuarantined, Meta
from allot.services.preemptor.app import Preemptor
from allot.services.runtime import code_version
from tests.aio import background

EVENTS = 2000


@pytest.fixture
async def history(tmp_path: Path, event_log: EventLog) -> Path:
    path = tmp_path / "history.jsonl"
    write_history(path, EVENTS, seed=9)
    await import_log(path, event_log)
    return path


def fold(records: list) -> State:  # type: ignore[type-arg]
    state = State()
    for record in records:
        apply_record(state, record, records)
    return state


async def store_fold(events: EventLog, upto: int, version: str | None = None) -> State:
    """A snapshot of the log up to ``upto``, as the planner stores it."""
    state = fold(await events.read(1, upto))
    await write_snapshot(events.js, encode_snapshot(state, version or code_version()), "test")
    return state


async def test_nothing_is_archived_without_a_trusted_snapshot_covering_it(
    tmp_path: Path, event_log: EventLog, history: Path
) -> None:
    to = tmp_path / "archive.jsonl"
    refusals = []
    for prepare, upto in [
        (None, 1000),  # no snapshot at all
        (lambda: store_fold(event_log, 800), 1000),  # one before --upto
        (lambda: store_fold(event_log, 1500, "0.0.1+other"), 1000),  # of other code
        (lambda: store_fold(event_log, 1500), 5000),  # --upto past the log
    ]:
        if prepare is not None:
            await prepare()
        with pytest.raises(ArchiveRefused) as refused:
            await archive(event_log, upto, to)
        refusals.append(str(refused.value))
    assert refusals[0].startswith("no snapshot is stored")
    assert refusals[1].startswith("--upto 1000: the latest snapshot is at sequence 800")
    assert refusals[2].startswith(
        "snapshot ALLOT_SNAPSHOTS/state cannot be trusted: written by code version"
    )
    assert refusals[3] == f"--upto 5000: the log holds sequences 1 to {await event_log.last_seq()}"

    forged = fold(await event_log.read(1, 1500))
    forged.usage.clear()
    await write_snapshot(event_log.js, encode_snapshot(forged, code_version()), "forged")
    with pytest.raises(ArchiveRefused, match=r"is not the fold of the log .*usage"):
        await archive(event_log, 1000, to)
    assert await event_log.first_seq() == 1  # nothing purged
    assert not to.exists()
    assert list(tmp_path.glob("*.partial")) == []
    assert await read_snapshot(event_log.js, BASE) is None


async def test_nothing_is_archived_that_a_later_quarantine_names(
    tmp_path: Path, event_log: EventLog, history: Path
) -> None:
    """The services refolded without it; a base that holds it would be another state."""
    meta = Meta(id="q", at=1, producer="operator")
    await event_log.append(EventQuarantined(meta=meta, seq=5, reason="bad", by="admin"))
    await store_fold(event_log, await event_log.last_seq())
    with pytest.raises(ArchiveRefused, match="a later quarantine names sequence 5"):
        await archive(event_log, 1000, tmp_path / "archive.jsonl")
    assert await event_log.first_seq() == 1


async def test_an_archived_log_is_begun_from_the_state_it_left(
    tmp_path: Path,
    nats_server: EmbeddedNats,
    event_log: EventLog,
    history: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    await store_fold(event_log, 1500)
    to = tmp_path / "archive.jsonl"
    first, count = await archive(event_log, 1200, to)
    assert (first, count) == (1, 1200)
    assert [r.seq for r in read_log(to)] == list(range(1, 1201))
    assert [r.data for r in read_log(to)] == [r.data for r in list(read_log(history))[:1200]]
    assert await event_log.first_seq() == 1201
    base = read_header(await read_snapshot(event_log.js, BASE) or b"")
    assert base.seq == 1200
    assert bytes(base.state) == encode_state(fold(list(read_log(history))[:1200]))

    # Replay of what is kept begins from the base; the archive replays on its own.
    kept = await _allot("replay", "--verify", "--nats-url", nats_server.url)
    assert kept.returncode == 0, kept.stdout + kept.stderr
    assert "all match" in kept.stdout
    archived = await _allot("replay", "--verify", "--log", str(to))
    assert archived.returncode == 0, archived.stdout + archived.stderr

    # A service with no newer snapshot begins from the base too, and holds what a fold of
    # the whole log holds.
    await write_snapshot(event_log.js, b"junk", "junk")
    preemptor = Preemptor(event_log, tick_s=0.2)
    end = await event_log.last_seq()
    async with background(preemptor.run()):
        await _wait_until(lambda: preemptor.state.seq >= end)
    whole = [*read_log(to), *await event_log.read(1201, preemptor.state.seq)]
    assert encode_state(preemptor.state) == encode_state(fold(whole))

    # Quarantining an archived event is refused: its effect is in the base.
    refused = await _allot(
        "log", "quarantine", "5", "--reason", "bad", "--nats-url", nats_server.url
    )
    assert refused.returncode == 2
    assert "the log holds sequences 1201 to" in refused.stderr

    # With no trusted state for the archived start, a service says so and stops.
    await drop_snapshot(event_log.js)
    caplog.set_level(logging.INFO, logger="allot")
    with pytest.raises(SystemExit):
        await Preemptor(event_log, tick_s=0.2).run()
    assert "cannot start: the log before sequence 1201 was archived" in caplog.text


async def test_the_archive_command_says_why_it_refuses(
    tmp_path: Path, nats_server: EmbeddedNats, history: Path
) -> None:
    done = await _allot(
        "log", "archive", "--upto", "10", "--to", str(tmp_path / "a.jsonl"),
        "--nats-url", nats_server.url,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.startswith("allot: no snapshot is stored")
    assert done.stderr.rstrip().endswith("; nothing was archived")


async def _allot(*args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "allot.client.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


async def _wait_until(test, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    async with asyncio.timeout(timeout):
        while not test():
            await asyncio.sleep(0.05)


async def test_nothing_is_archived_on_a_snapshot_past_the_end_of_the_log(
    tmp_path: Path, event_log: EventLog, history: Path
) -> None:
    """A snapshot the log has not reached (a log begun again): checking it would wait for
    events that may never come."""
    ahead = fold(await event_log.read(1, 100))
    ahead.seq = EVENTS * 10
    await write_snapshot(event_log.js, encode_snapshot(ahead, code_version()), "ahead")
    last = await event_log.last_seq()
    async with asyncio.timeout(30):
        with pytest.raises(ArchiveRefused, match=f"at sequence {EVENTS * 10}, past the end "):
            await archive(event_log, 100, tmp_path / "archive.jsonl")
    assert await event_log.first_seq() == 1
    assert await event_log.last_seq() == last


async def test_nothing_is_archived_that_a_quarantine_after_the_snapshot_names(
    tmp_path: Path, event_log: EventLog, history: Path
) -> None:
    """The quarantine came after the latest snapshot (the planner stores one every so many
    events): the services refolded without sequence 5 all the same."""
    await store_fold(event_log, await event_log.last_seq())
    meta = Meta(id="q", at=1, producer="operator")
    await event_log.append(EventQuarantined(meta=meta, seq=5, reason="bad", by="admin"))
    with pytest.raises(ArchiveRefused, match="a later quarantine names sequence 5"):
        await archive(event_log, 1000, tmp_path / "archive.jsonl")
    assert await event_log.first_seq() == 1
    assert await read_snapshot(event_log.js, BASE) is None


async def test_replay_of_an_archived_log_says_why_its_base_cannot_be_used(
    tmp_path: Path, nats_server: EmbeddedNats, event_log: EventLog, history: Path
) -> None:
    """A base that cannot be read whole, or one from before what the log still holds: one
    line and exit 2, as a service says it and stops, never a traceback or a replay of a
    state that skips events."""
    await store_fold(event_log, 1500)
    await archive(event_log, 1200, tmp_path / "archive.jsonl")
    early = fold(list(read_log(history))[:100])
    await write_snapshot(event_log.js, encode_snapshot(early, code_version()), "early", BASE)
    stale = await _allot("replay", "--verify", "--nats-url", nats_server.url)
    assert (stale.returncode, stale.stderr) == (
        2,
        "allot: the log before sequence 1201 was archived, and its base snapshot "
        "ALLOT_SNAPSHOTS/base cannot be used: it is at sequence 100\n",
    )
    subject = "$O.ALLOT_SNAPSHOTS.M.YmFzZQ=="  # the meta of "base"
    meta = json.loads((await event_log.js.get_last_msg("OBJ_ALLOT_SNAPSHOTS", subject)).data)
    meta["digest"] = "SHA-256=" + "A" * 43 + "="
    await event_log.js.publish(subject, json.dumps(meta).encode(), headers={"Nats-Rollup": "sub"})
    unreadable = await _allot("replay", "--verify", "--nats-url", nats_server.url)
    assert (unreadable.returncode, unreadable.stderr) == (
        2,
        "allot: the log before sequence 1201 was archived, and its base snapshot "
        "ALLOT_SNAPSHOTS/base cannot be used: its SHA-256 is not the one its meta states\n",
    )
