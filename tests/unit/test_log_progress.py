"""`allot log import` reports its progress as it appends (a bar on a terminal)."""

from pathlib import Path

from allot.bus import MemoryEventLog
from allot.client.bench_replay import write_history
from allot.client.logfile import import_log


async def test_import_reports_its_progress(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    write_history(path, 40, seed=2)
    lines = len(path.read_text().splitlines())
    told: list[tuple[int, int | None]] = []
    events = MemoryEventLog()
    count = await import_log(path, events, progress=lambda n, total: told.append((n, total)))
    assert count == lines
    assert told == [(n, lines) for n in range(1, lines + 1)]
    assert await events.last_seq() == lines
