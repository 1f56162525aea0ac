"""Replay on a seeded history: clean logs verify; corrupt or unjustified plans do not."""

import asyncio
import contextlib
import datetime
import json
import os
import pty
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest

from allot.bus import MemoryEventLog
from allot.bus.codec import decode
from allot.bus.eventlog import Record
from allot.client.bench_replay import write_history
from allot.client.logfile import LogFileError, export_log, read_log
from allot.client.replay import all_records
from allot.core.replay import verify
from allot.proto.events import PlanComputed
from allot.proto.subjects import PLAN_EVENTS
from allot.services.runtime import code_version
from tests import builders as b


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    path = tmp_path_factory.mktemp("replay") / "history.jsonl"
    write_history(path, 3000, seed=4)
    return path.read_text().splitlines()


def verified(lines: list[str], tmp_path: Path):  # type: ignore[no-untyped-def]
    path = tmp_path / "log.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return verify(read_log(path, PLAN_EVENTS[:-1]), read_log(path), code_version())


def admitting_plan(lines: list[str]) -> int:
    return next(n for n, line in enumerate(lines) if '"admissions":[{' in line)


def test_a_clean_history_verifies(history: list[str], tmp_path: Path) -> None:
    result = verified(history, tmp_path)
    assert result.divergences == []
    assert result.warnings == []
    assert result.plans == sum('"type":"PlanComputed"' in line for line in history)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda e: e["admissions"][0].update(funded="yes"), "undecodable PlanComputed"),
        (lambda e: e.update(basis_seq=10**6), "a plan the log cannot justify"),
        (lambda e: e["admissions"][0].update(funded=True), "admissions"),
        (lambda e: e.update(now=e["now"] + 7 * 10**9), ""),
    ],
)
def test_a_changed_plan_fails_at_its_sequence(
    history: list[str], tmp_path: Path, change: object, reason: str
) -> None:
    lines = list(history)
    n = admitting_plan(lines)
    line = json.loads(lines[n])
    change(line["event"])  # type: ignore[operator]
    lines[n] = json.dumps(line)
    result = verified(lines, tmp_path)
    if not reason:  # a plan made at another moment may decide the same: that is no proof
        assert [d.seq for d in result.divergences] in ([], [line["seq"]])
        return
    assert [d.seq for d in result.divergences] == [line["seq"]]
    assert reason in result.divergences[0].diff[0]


def test_a_policy_whose_settings_do_not_match_its_hash_is_not_used(
    history: list[str], tmp_path: Path
) -> None:
    lines = list(history)
    n = next(i for i, line in enumerate(lines) if "PolicyAdopted" in line)
    line = json.loads(lines[n])
    line["event"]["policy_json"] = line["event"]["policy_json"].replace(
        '"backfill":true', '"backfill":false'
    )
    lines[n] = json.dumps(line)
    result = verified(lines, tmp_path)
    assert any("unreadable" in w for w in result.warnings)


def test_a_malformed_old_event_is_a_decode_error_not_a_crash() -> None:
    for admissions in (b"null", b'[{"job_id":"j"}]'):
        old = (
            b'{"type":"PlanComputed","meta":{"id":"e","at":1,"producer":"p","v":1},'
            b'"basis_seq":0,"now":1,"policy":"p","policy_hash":"h","code_version":"c",'
            b'"admissions":' + admissions + b"}"
        )
        with pytest.raises(msgspec.DecodeError):
            decode(old)


def test_bad_files_are_named_errors(tmp_path: Path) -> None:
    (tmp_path / "b64.jsonl").write_text('{"seq":1,"subject":"allot.evt.x","data_b64":"abc"}\n')
    with pytest.raises(LogFileError, match=re.escape("b64.jsonl:1: data_b64")):
        list(read_log(tmp_path / "b64.jsonl"))
    (tmp_path / "broken.jsonl.gz").write_bytes(b"\x1f\x8b\x08\x00" + b"garbage" * 10)
    with pytest.raises(LogFileError, match=re.escape("broken.jsonl.gz")):
        list(read_log(tmp_path / "broken.jsonl.gz"))


OLD_DRAINS = Path(__file__).parent / "data" / "drains-before-graceful.jsonl"


def test_a_log_of_drains_from_before_graceful_drains_replays_as_it_was_decided() -> None:
    """Recorded by the code of then: a node drained at once, its jobs that cannot resume
    stopped (and lost) as they passed their minimum runtime. Its ``NodeCordoned`` has no
    ``now``, and must still mean what it meant."""
    result = verify(read_log(OLD_DRAINS, PLAN_EVENTS[:-1]), read_log(OLD_DRAINS), code_version())
    # Its accounts lab/other and lab/team, both without usage, tie in fair share: the code of
    # then ranked them by name, and so ordered the first plan's jobs, which took the node's
    # GPUs in that order (docs/adr/0031). The same jobs start on the same node; nothing else
    # differs.
    plans = [r.event for r in read_log(OLD_DRAINS) if isinstance(r.event, PlanComputed)]
    [first] = result.divergences
    assert first.seq == next(r.seq for r in read_log(OLD_DRAINS) if r.event == plans[0])
    admitted = sorted(a.job_id for a in plans[0].admissions)
    assert set(first.jobs) <= set(admitted)
    assert all(line.startswith(("admissions ", "ranks lab/team:")) for line in first.diff)
    assert all('recomputed {"placements":[{"node_id":"n1"' in line for line in first.diff[:-1])
    assert 'recorded {"rank":3,' in first.diff[-1]  # after lab/other, at 2
    assert 'recomputed {"rank":2,' in first.diff[-1]  # tied with it
    drains = [(p.job_id, p.code) for decided in plans for p in decided.preemptions]
    assert sorted(drains) == [(j, "DRAIN") for j in ["endless", "once", "resumable", "spare"]]


def replay_at(log: Path, at: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "allot.client.cli", "replay", "--log", str(log), "--at", at],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def iso(ns: int) -> str:
    return datetime.datetime.fromtimestamp(ns / 1e9, datetime.UTC).isoformat()


def test_a_moment_outside_the_log_is_refused_not_clamped(
    history: list[str], tmp_path: Path
) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text("\n".join(history[:200]) + "\n")
    last = json.loads(history[199])["seq"]
    stamps = [json.loads(line)["event"]["meta"]["at"] for line in history[:200]]

    assert replay_at(log, str(last)).returncode == 0
    past = replay_at(log, str(last + 1))
    assert past.returncode == 2
    assert past.stderr.strip().splitlines() == [
        f"allot: --at {last + 1}: past the end of the log, whose last sequence is {last}"
    ]

    assert replay_at(log, iso(max(stamps))).returncode == 0
    for moment, where in [(min(stamps) - 10**9, "before"), (max(stamps) + 10**9, "after")]:
        refused = replay_at(log, iso(moment))
        assert refused.returncode == 2, refused.stderr
        [line] = refused.stderr.strip().splitlines()
        assert line.startswith(f"allot: --at {iso(moment)}: {where} the "), line
        assert "Traceback" not in refused.stderr


def test_verify_reports_its_progress(history: list[str], tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text("\n".join(history) + "\n")
    told: list[int] = []
    verify(read_log(path, PLAN_EVENTS[:-1]), read_log(path), code_version(),
           progress=lambda done, total: told.append(done))  # fmt: skip
    assert told == list(range(1, len(history) + 1))


async def test_export_reports_its_progress(history: list[str], tmp_path: Path) -> None:
    source = tmp_path / "log.jsonl"
    source.write_text("\n".join(history[:100]) + "\n")

    async def records() -> AsyncIterator[Record]:
        for record in read_log(source):
            yield record

    told: list[tuple[int, int | None]] = []
    count = await export_log(records(), tmp_path / "out.jsonl",
                             progress=lambda done, total: told.append((done, total)))  # fmt: skip
    assert count == 100
    assert told == [(n, None) for n in range(1, 101)]


def test_progress_is_shown_on_a_terminal_only(history: list[str], tmp_path: Path) -> None:
    """Scripts and tests read stderr clean; a person at a terminal sees the work go on."""
    log = tmp_path / "log.jsonl"
    log.write_text("\n".join(history) + "\n")
    argv = [sys.executable, "-m", "allot.client.cli", "replay", "--verify", "--log", str(log)]
    piped = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert piped.returncode == 0, piped.stderr
    assert piped.stderr == ""

    main, terminal = pty.openpty()
    try:
        env = {**os.environ, "TERM": "xterm", "COLUMNS": "100"}
        on_terminal = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=terminal, env=env)
        os.close(terminal)
        shown = b""
        with contextlib.suppress(OSError):  # EIO: the process closed the terminal
            while chunk := os.read(main, 65536):
                shown += chunk
        assert on_terminal.wait(timeout=120) == 0
    finally:
        os.close(main)
    assert b"verifying" in shown, shown[:500]


@pytest.mark.parametrize("purged_before", [1, 3, 6])
async def test_every_record_is_what_the_log_still_holds(purged_before: int) -> None:
    """What ``allot replay`` and ``allot log export`` read: after an archive of the whole
    log, nothing, rather than a wait for a record that will not come."""
    events = MemoryEventLog()
    for n in range(5):
        await events.append(b.submitted(f"j{n}"))
    await events.purge_before(purged_before)
    async with asyncio.timeout(5):
        read = [record.seq async for record in all_records(events)]
    assert read == list(range(purged_before, 6))
