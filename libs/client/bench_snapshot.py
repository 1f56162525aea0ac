"""``allot bench snapshot``: how long a restarted planner takes to catch up on a long log,
without a snapshot and with one, side by side.

It writes the seeded history of ``allot bench replay`` (``--events`` long), loads it into
a NATS server of its own, and starts the planner process on it twice:

- **without**: no snapshot stored; the planner folds the log from sequence 1, and once
  caught up it stores a snapshot (as it does every ``SNAPSHOT_EVERY`` events);
- **with**: the planner started again, from that snapshot, folding only what came after:
  ``--tail`` events appended meanwhile (job submissions; 0 by default), up to what the
  planner lets pass between two snapshots.

Caught up is the planner's own line, logged once it has folded the whole log (before it
plans). The time is from the process's start (Python's start-up and the connection
included) to that line: what an operator waits after a restart.
"""

import argparse
import asyncio
import json
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from allot.bus.eventlog import EventLog
from allot.bus.server import EmbeddedNats
from allot.bus.snapshots import drop_snapshot, read_snapshot
from allot.client.bench_replay import write_history
from allot.client.client import AsyncClient
from allot.client.logfile import import_log
from allot.core.snapshot import read_header
from allot.proto.events import JobSpec, JobSubmitted, Meta

CAUGHT_UP = re.compile(
    r"caught up at sequence (\d+), ([\d.]+) s after starting, from sequence (\d+)"
)
STORED = re.compile(r"snapshot at sequence (\d+) stored")
WAIT_S = 3600.0  # a fold of millions of events from sequence 1 takes minutes


async def bench_snapshot(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="allot-bench-snapshot-") as scratch:
        report = await _measure(Path(scratch), args.events, args.seed, args.tail)
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
    else:
        print(_text(report))
    return 0


async def _measure(scratch: Path, events: int, seed: int, tail: int) -> dict[str, Any]:
    history = scratch / "history.jsonl"
    started = time.perf_counter()
    written = write_history(history, events, seed)
    generate_s = time.perf_counter() - started
    async with EmbeddedNats(scratch / "nats") as server:
        client = await AsyncClient.connect(server.url)
        async with client:
            started = time.perf_counter()
            await import_log(history, client.events)
            import_s = time.perf_counter() - started
            await drop_snapshot(client.events.js)
            # Without: it folds from sequence 1 and, caught up, stores its snapshot at once.
            without = await _restart(server.url, ["--snapshot-every", "1"], wait_for_snapshot=True)
            stored = await read_snapshot(client.events.js)
            assert stored is not None
            header = read_header(stored)
            await _submit(client.events, tail)
            with_ = await _restart(server.url, ["--snapshot-every", "0"])
            if with_["from_seq"] != header.seq + 1:
                raise RuntimeError(f"the planner did not start from the snapshot: {with_}")
    return {
        "events": written,
        "seed": seed,
        "generate_s": round(generate_s, 1),
        "import_s": round(import_s, 1),
        "snapshot": {"seq": header.seq, "bytes": len(stored)},
        "tail": tail,
        "without_snapshot": without,
        "with_snapshot": with_,
    }


async def _submit(events: EventLog, count: int) -> None:
    """``count`` submissions after the snapshot: the tail a restart folds."""
    spec = JobSpec(account="p0/t0", gpus=1, command=["train"], max_runtime_ns=3600 * 10**9)
    for n in range(count):
        meta = Meta(id=f"tail-{n}", at=time.time_ns(), producer="bench")
        await events.append(JobSubmitted(meta=meta, job_id=f"tail-{n}", spec=spec))


async def _restart(url: str, options: list[str], wait_for_snapshot: bool = False) -> dict[str, Any]:
    """Start the planner; when it says it is caught up, how long that took and from where."""
    began = time.perf_counter()
    planner = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "allot.services.planner", "--nats-url", url,
        "--snapshot-interval", "0", *options,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert planner.stderr is not None
    result: dict[str, Any] = {}
    try:
        async with asyncio.timeout(WAIT_S):
            while not result or (wait_for_snapshot and "stored_seq" not in result):
                line = (await planner.stderr.readline()).decode(errors="replace")
                if not line:
                    raise RuntimeError(f"the planner ended (status {await planner.wait()})")
                if caught_up := CAUGHT_UP.search(line):
                    result = {
                        "caught_up_s": round(time.perf_counter() - began, 2),
                        "in_process_s": float(caught_up[2]),
                        "at_seq": int(caught_up[1]),
                        "from_seq": int(caught_up[3]),
                        "folded": int(caught_up[1]) - int(caught_up[3]) + 1,
                    }
                elif result and (stored := STORED.search(line)):
                    result["stored_seq"] = int(stored[1])
    finally:
        planner.terminate()
        await planner.wait()
    return result


def _text(report: dict[str, Any]) -> str:
    lines = [
        f"planner restart on {report['events']:,} events (seed {report['seed']}; history "
        f"written in {report['generate_s']} s, imported in {report['import_s']} s); "
        f"snapshot at sequence {report['snapshot']['seq']:,}, {report['snapshot']['bytes']:,} "
        f"bytes, then {report['tail']:,} events more",
        f"{'':18}{'caught up':>12}{'in process':>12}{'events folded':>15}",
    ]
    for name in ("without_snapshot", "with_snapshot"):
        run, title = report[name], name.replace("_", " ")
        lines.append(
            f"{title:18}{run['caught_up_s']:>10.2f} s{run['in_process_s']:>10.2f} s"
            f"{run['folded']:>15,}"
        )
    return "\n".join(lines)
