"""``allot bench view``: what ``allot status``, ``queue`` and ``explain`` cost as the log grows.

For each log size it writes the seeded history of ``allot bench replay`` (32 nodes, teams,
jobs arriving, running, charged and ending, the plans the planner made), loads it into a
NATS server of its own, starts the read model on it and times, side by side:

- **before**: what each of these commands did until the read model existed, fold the whole
  log in the client (``AsyncClient.state``), once per size (it is slow enough);
- **after**: the commands as they are now, one query to the read model, ``--repeat`` times
  each over one connection (the query and the table, not Python's start-up);
- the whole ``allot`` process, a few times, for what a user waits in all.

It prints percentiles and the ratio of the largest log's median to the smallest's.
"""

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from allot.bus.server import EmbeddedNats
from allot.client import render
from allot.client.bench import percentile
from allot.client.bench_replay import write_history
from allot.client.client import AsyncClient
from allot.client.logfile import import_log
from allot.proto.queries import EXPLAIN, JOBS, QUEUE, ExplainQuery, JobsQuery, QueueQuery

COMMANDS = ("status", "queue", "explain")
STATUS_ROWS = 50  # jobs a status shows: as many on the smallest log as on the largest


async def bench_view(args: argparse.Namespace) -> int:
    results = []
    for events in args.events:
        with tempfile.TemporaryDirectory(prefix="allot-bench-view-") as scratch:
            results.append(await _one_size(Path(scratch), events, args))
    report = {"seed": args.seed, "repeat": args.repeat, "sizes": results}
    if len(results) > 1:
        small, large = results[0], results[-1]
        report["ratio_largest_to_smallest_p50"] = {
            name: round(large["after_ms"][name]["p50"] / small["after_ms"][name]["p50"], 2)
            for name in COMMANDS
        }
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
    else:
        print(_text(report))
    return 0


async def _one_size(scratch: Path, events: int, args: argparse.Namespace) -> dict[str, Any]:
    history = scratch / "history.jsonl"
    written = write_history(history, events, args.seed)
    async with EmbeddedNats(scratch / "nats") as server:
        client = await AsyncClient.connect(server.url)
        async with client:
            await client.events.ensure_stream()
            await import_log(history, client.events)
            began = time.perf_counter()
            view = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "allot.services.view", "--nats-url", server.url,
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
            )  # fmt: skip
            try:
                await client.ready(3600.0, ("view",))  # it answers once it has read the log
                caught_up_s = time.perf_counter() - began
                job_id = await _a_waiting_job(client)
                after = {
                    name: await _timed(args.repeat, _query(client, name, job_id))
                    for name in COMMANDS
                }
                before_s = None
                if not args.no_before:
                    started = time.perf_counter()
                    await client.state()
                    before_s = time.perf_counter() - started
                whole = await _whole_processes(server.url, job_id, args.processes)
            finally:
                view.terminate()
                await view.wait()
    return {
        "events": written,
        "view_caught_up_s": round(caught_up_s, 2),
        "before_fold_in_client_s": None if before_s is None else round(before_s, 3),
        "after_ms": after,
        "whole_process_ms": whole,
    }


async def _a_waiting_job(client: AsyncClient) -> str:
    """A job to explain: the head of the queue, else the newest job."""
    queued = await client.query(QUEUE, QueueQuery(limit=1))
    if queued.data["rows"]:
        return str(queued.data["rows"][0]["job_id"])
    newest = await client.query(JOBS, JobsQuery(limit=1))
    return str(newest.data[0]["job_id"])


def _query(client: AsyncClient, name: str, job_id: str) -> Callable[[], Awaitable[object]]:
    """One command as ``allot`` runs it: its query, then its table."""

    async def status() -> object:
        answer = await client.query(JOBS, JobsQuery(limit=STATUS_ROWS))
        return render.table(["JOB"], [[view["job_id"]] for view in answer.data])

    async def queue() -> object:
        answer = await client.query(QUEUE, QueueQuery())
        return render.queue_table(answer.data["rows"])

    async def explain() -> object:
        answer = await client.query(EXPLAIN, ExplainQuery(job_id=job_id))
        return render.explain_text(answer.data)

    return {"status": status, "queue": queue, "explain": explain}[name]


async def _timed(repeat: int, call: Callable[[], Awaitable[object]]) -> dict[str, float]:
    await call()  # warm
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        await call()
        times.append((time.perf_counter() - started) * 1000)
    return _summary(times)


async def _whole_processes(url: str, job_id: str, count: int) -> dict[str, dict[str, float]]:
    """``allot status`` (and the others) as a user runs them: a new process each time."""
    whole = {}
    for name in COMMANDS:
        argv = [name, job_id] if name == "explain" else [name]
        times = []
        for _ in range(count):
            started = time.perf_counter()
            done = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "allot.client.cli", *argv, "--nats-url", url,
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
            )  # fmt: skip
            if await done.wait() != 0:
                raise RuntimeError(f"allot {' '.join(argv)} failed")
            times.append((time.perf_counter() - started) * 1000)
        whole[name] = _summary(times)
    return whole


def _summary(times: list[float]) -> dict[str, float]:
    return {
        "p50": round(statistics.median(times), 2),
        "p95": round(percentile(times, 95), 2),
        "max": round(max(times), 2),
    }


def _text(report: dict[str, Any]) -> str:
    lines = [f"allot status / queue / explain against the read model (seed {report['seed']}, "
             f"{report['repeat']} queries each; ms)"]  # fmt: skip
    for size in report["sizes"]:
        before = size["before_fold_in_client_s"]
        lines.append(
            f"\n{size['events']:>10,} events: read model caught up in {size['view_caught_up_s']} s;"
            + ("" if before is None else f" before, every call folded the log: {before} s")
        )
        for name in COMMANDS:
            after, whole = size["after_ms"][name], size["whole_process_ms"][name]
            lines.append(
                f"  {name:<8} query p50 {after['p50']:>7.2f}  p95 {after['p95']:>7.2f}   "
                f"whole process p50 {whole['p50']:>7.1f}"
            )
    if "ratio_largest_to_smallest_p50" in report:
        ratios = report["ratio_largest_to_smallest_p50"]
        lines.append(
            "\nlargest / smallest log, query p50: "
            + ", ".join(f"{name} {ratio:.2f}x" for name, ratio in ratios.items())
        )
    return "\n".join(lines)
