"""Snapshots of the folded log in NATS: stored and read back whole, written by the planner
(and the operator) alone, and a service started from one folds only the tail and holds the
state a fold of the whole log holds."""

import asyncio
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import nats
import pytest

from allot.bus import EmbeddedNats, EventLog, snapshots
from allot.bus.identity import Keyring, load
from allot.bus.snapshots import SnapshotUnreadable, read_snapshot, write_snapshot
from allot.client.bench_replay import write_history
from allot.client.logfile import import_log
from allot.core import State, apply_record
from allot.core.snapshot import encode_snapshot, read_header
from allot.services.planner.app import Planner
from allot.services.preemptor.app import Preemptor
from allot.services.runtime import code_version
from tests import builders as b
from tests.aio import background
from tests.unit.test_snapshot import charged_past_64_bits


async def test_a_snapshot_is_read_back_whole_and_replaced_by_the_next(
    event_log: EventLog,
) -> None:
    assert await read_snapshot(event_log.js) is None  # no bucket yet
    first = os.urandom(3 << 20)  # several chunks
    await write_snapshot(event_log.js, first, "first")
    assert await read_snapshot(event_log.js) == first
    second = os.urandom(1000)
    await write_snapshot(event_log.js, second, "second")
    assert await read_snapshot(event_log.js) == second
    info = await event_log.js.stream_info("OBJ_ALLOT_SNAPSHOTS")
    assert info.state.messages == 2  # the first one's chunks are gone: one chunk, one meta


@pytest.mark.slow
async def test_only_the_planner_writes_snapshots_and_every_service_reads_them(
    tmp_path: Path,
) -> None:
    keyring = Keyring(tmp_path / "identities")
    keyring.ensure("admin", "operator")
    who = {
        name: load(keyring.ensure(name, role))  # type: ignore[arg-type]
        for name, role in [
            ("planner", "planner"),
            ("intake", "intake"),
            ("preemptor", "preemptor"),
            ("admin", "operator"),
            ("alice", "user"),
        ]
    }
    async with EmbeddedNats(tmp_path / "nats", keyring=keyring) as server:
        logs = {name: await EventLog.connect(server.url, identity=who[name]) for name in who
                if name != "alice"}  # fmt: skip
        alice = await nats.connect(server.url, **_user_options(who["alice"]))
        try:
            await write_snapshot(logs["planner"].js, b"the planner's", "real")
            for name in ("intake", "preemptor", "admin"):
                assert await read_snapshot(logs[name].js) == b"the planner's"
            for name in ("intake", "preemptor"):
                with pytest.raises((nats.errors.Error, TimeoutError)):
                    await write_snapshot(logs[name].js, b"forged by " + name.encode(), "forged")
            with pytest.raises((nats.errors.Error, TimeoutError)):
                await write_snapshot(alice.jetstream(timeout=2), b"forged by alice", "forged")
            await alice.publish("$O.ALLOT_SNAPSHOTS.M.c3RhdGU=", b"{}")  # a meta by hand
            await alice.flush()
            assert await read_snapshot(logs["intake"].js) == b"the planner's"
            for name in ("intake", "planner"):  # nobody but the operator purges the log
                with pytest.raises((nats.errors.Error, TimeoutError)):
                    await logs[name].purge_before(2)
            # The operator, who archives the log's start, may: it stores the state left.
            await write_snapshot(logs["admin"].js, b"the operator's", "base", "base")
            assert await read_snapshot(logs["intake"].js, "base") == b"the operator's"
        finally:
            await alice.close()
            for log in logs.values():
                await log.close()


def _user_options(identity: object) -> dict[str, object]:
    from allot.bus.identity import connect_options

    return {"name": "alice", **connect_options("alice", identity, None)}  # type: ignore[arg-type]


async def test_a_planner_restarted_from_its_snapshot_folds_only_the_tail(
    tmp_path: Path, nats_server: EmbeddedNats, event_log: EventLog, caplog: pytest.LogCaptureFixture
) -> None:
    history = tmp_path / "history.jsonl"
    write_history(history, 3000, seed=11)
    await import_log(history, event_log)
    caplog.set_level(logging.INFO, logger="allot")

    first = Planner(event_log, tick_s=0.2, snapshot_every=1000, snapshot_interval_s=0)
    async with background(first.run()):
        stored = await _wait_for_snapshot(event_log)
    assert "folding the log from sequence 1" in caplog.text
    assert stored.seq >= 3000
    assert stored.code_version == code_version()

    caplog.clear()
    for i in range(5):  # the log goes on after the snapshot: a tail to fold
        await event_log.append(b.submitted(f"late-{i}"))
    second_log = await EventLog.connect(nats_server.url)
    second = Planner(second_log, tick_s=0.2, snapshot_every=0)
    try:
        async with background(second.run()):
            end = await event_log.last_seq()
            await _wait_until(lambda: second.state.seq >= end)
    finally:
        await second_log.close()
    assert f"starting from the snapshot at sequence {stored.seq}" in caplog.text
    assert f"from sequence {stored.seq + 1}" in caplog.text
    assert _folded(await event_log.read(1, second.state.seq)) == _image(second.state)


async def test_a_snapshot_of_other_code_is_not_trusted(
    nats_server: EmbeddedNats, event_log: EventLog, caplog: pytest.LogCaptureFixture
) -> None:
    for i in range(20):
        await event_log.append(b.submitted(f"j{i}"))
    stale = State()
    for record in await event_log.read():
        apply_record(stale, record)
    await write_snapshot(event_log.js, encode_snapshot(stale, "0.0.1+other"), "stale")
    caplog.set_level(logging.INFO, logger="allot")
    preemptor = Preemptor(event_log, tick_s=0.2)
    async with background(preemptor.run()):
        await _wait_until(lambda: preemptor.state.seq >= 20)
    lines = [r.getMessage() for r in caplog.records if "snapshot" in r.getMessage()]
    assert lines == [
        "snapshot not used, folding the log from sequence 1: written by code version "
        f"'0.0.1+other', not {code_version()!r}"
    ]
    assert _image(preemptor.state) == _image(stale)


async def test_a_corrupt_snapshot_is_not_trusted(
    event_log: EventLog, caplog: pytest.LogCaptureFixture
) -> None:
    await event_log.append(b.submitted("j1"))
    good = encode_snapshot(State(), code_version())
    await write_snapshot(event_log.js, good[: len(good) // 2], "cut short")
    caplog.set_level(logging.INFO, logger="allot")
    preemptor = Preemptor(event_log, tick_s=0.2)
    async with background(preemptor.run()):
        await _wait_until(lambda: preemptor.state.seq >= 1)
    assert "snapshot not used, folding the log from sequence 1: not a snapshot" in caplog.text
    assert "j1" in preemptor.state.jobs


async def _wait_for_snapshot(events: EventLog, timeout: float = 60.0):  # type: ignore[no-untyped-def]
    async with asyncio.timeout(timeout):
        while True:
            data = await read_snapshot(events.js)
            if data is not None:
                return read_header(data)
            await asyncio.sleep(0.1)


async def _wait_until(test, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    async with asyncio.timeout(timeout):
        while not test():
            await asyncio.sleep(0.05)


def _folded(records: list) -> bytes:  # type: ignore[type-arg]
    state = State()
    for record in records:
        apply_record(state, record)
    return _image(state)


def _image(state: State) -> bytes:
    return bytes(read_header(encode_snapshot(state, "any")).state)


async def test_replay_verify_checks_the_stored_snapshot(
    tmp_path: Path, nats_server: EmbeddedNats, event_log: EventLog
) -> None:
    history = tmp_path / "history.jsonl"
    write_history(history, 1500, seed=3)
    await import_log(history, event_log)
    state = State()
    for record in await event_log.read(1, 1200):
        apply_record(state, record)
    await write_snapshot(event_log.js, encode_snapshot(state, code_version()), "good")
    good = await _allot("replay", "--verify", "--nats-url", nats_server.url)
    assert good.returncode == 0, good.stderr
    assert "1 snapshot(s) checked: all match" in good.stdout

    state.usage.clear()  # charges no snapshot of this log forgets
    await write_snapshot(event_log.js, encode_snapshot(state, code_version()), "forged")
    forged = await _allot("replay", "--verify", "--nats-url", nats_server.url)
    assert forged.returncode == 1
    assert (
        "snapshot ALLOT_SNAPSHOTS/state at sequence 1200 is not the fold of the log up to it "
        "(it differs in: usage)"
    ) in forged.stdout


async def _allot(*args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "allot.client.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"size": 5 << 30}, f"{5 << 30} bytes; at most {4 << 30} are read"),
        ({"size": 10}, "bytes came; its meta says 10"),
        ({"digest": "SHA-256=" + "A" * 43 + "="}, "its SHA-256 is not the one its meta states"),
        ({"digest": "MD5=abc"}, "its SHA-256 is not the one its meta states"),
    ],
)
async def test_a_snapshot_whose_meta_lies_is_not_read(
    event_log: EventLog, change: dict[str, object], why: str
) -> None:
    await write_snapshot(event_log.js, os.urandom(300_000), "real")
    subject = "$O.ALLOT_SNAPSHOTS.M.c3RhdGU="  # the meta of "state"
    meta = json.loads((await event_log.js.get_last_msg("OBJ_ALLOT_SNAPSHOTS", subject)).data)
    await event_log.js.publish(
        subject, json.dumps({**meta, **change}).encode(), headers={"Nats-Rollup": "sub"}
    )
    with pytest.raises(SnapshotUnreadable, match=why):
        await read_snapshot(event_log.js)


async def test_a_planner_whose_state_has_no_snapshot_goes_on_planning(
    event_log: EventLog, caplog: pytest.LogCaptureFixture
) -> None:
    """A state a snapshot cannot hold (sums past 64 bits, from forged charges) costs the
    snapshot, said once, not the planner's cycles: they go on, and no error escapes."""
    state = charged_past_64_bits()
    planner = Planner(event_log, snapshot_every=1, snapshot_interval_s=3600)
    planner.state.become(state)
    caplog.set_level(logging.INFO, logger="allot")
    await planner.plan_once()
    await planner.plan_once()
    lines = [r.getMessage() for r in caplog.records if "snapshot" in r.getMessage()]
    assert lines == [
        f"snapshot at sequence {state.seq} not taken: the state at sequence {state.seq} "
        "holds a number past 64 bits, which a snapshot cannot hold"
    ]


async def test_a_snapshot_past_the_end_of_the_log_is_not_trusted(
    event_log: EventLog, caplog: pytest.LogCaptureFixture
) -> None:
    """A log begun again (its stream deleted, the snapshots kept): a snapshot at a
    sequence the log has not reached would have the service wait for events past it, and
    never fold the ones the log holds."""
    ahead = State()
    ahead.seq = 5000
    await write_snapshot(event_log.js, encode_snapshot(ahead, code_version()), "ahead")
    for i in range(3):
        await event_log.append(b.submitted(f"j{i}"))
    caplog.set_level(logging.INFO, logger="allot")
    preemptor = Preemptor(event_log, tick_s=0.2)
    async with background(preemptor.run()):
        await _wait_until(lambda: "caught up" in caplog.text)
    assert (
        "snapshot not used, folding the log from sequence 1: it is at sequence 5000, "
        "past the end of the log (3)"
    ) in caplog.text
    assert sorted(preemptor.state.jobs) == ["j0", "j1", "j2"]


async def test_a_snapshot_replaced_while_it_is_read_is_read_again(
    nats_server: EmbeddedNats, event_log: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The planner stores a new snapshot while a service starts: the old one's chunks are
    purged under the reader, which reads the new one instead of giving up (and folding
    the whole log). The replacement comes exactly between the reader's look at the meta
    and its read of the chunks: a writer replacing it as fast as it can instead wins the
    race five times in a row on a loaded machine, as it should."""
    blobs = [os.urandom(4 << 20), os.urandom(4 << 20)]
    await write_snapshot(event_log.js, blobs[0], "first")
    reader = await EventLog.connect(nats_server.url)
    read_chunks = snapshots._chunks
    replaced = []

    async def replaced_first(*args: Any) -> bytes | None:
        if not replaced:
            replaced.append(True)
            await write_snapshot(event_log.js, blobs[1], "second")
        return await read_chunks(*args)

    monkeypatch.setattr(snapshots, "_chunks", replaced_first)
    try:
        async with asyncio.timeout(30):
            assert await read_snapshot(reader.js) == blobs[1]
        assert replaced == [True]
    finally:
        await reader.close()
