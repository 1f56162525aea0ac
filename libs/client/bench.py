"""``allot bench stack``: submit-to-start latency on an idle stack, the wall time of a cold
``allot submit`` process, and sustained intake throughput.

It starts its own stack in a temporary directory, so the numbers do not depend on what else
runs. Latency is measured from the ``at`` of ``JobSubmitted`` (stamped by intake) to the
``at`` of ``JobStarted`` (stamped by the node agent), one job at a time. Throughput is the
rate at which the intake acknowledges submissions with ``--concurrency`` in flight; then how
long the planner needs to state a reason for every queued job.
"""

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from allot.client.client import AsyncClient
from allot.client.stack import NodeShape, Stack
from allot.core import JobStatus
from allot.proto.events import JobSpec


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


async def bench(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="allot-bench-") as tmp:
        stack = Stack(
            Path(tmp),
            [NodeShape(node_id="node-1", gpus=8)],
            restart=False,
            secure=not args.insecure,
            tls=args.tls,
            metrics_port=0 if args.metrics else None,
        )
        await stack.start()
        try:
            async with await stack.client() as client:
                latency = await submit_to_start(client, args.jobs)
                cli = await cli_submit_wall(stack, args.cli_runs)
                throughput = await intake_throughput(client, args.burst, args.concurrency)
        finally:
            await stack.stop()
    result = {"submit_to_start_ms": latency, "cli_submit_ms": cli, "intake": throughput}
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True))
    else:
        print(
            f"submit→start over {args.jobs} jobs: p50 {latency['p50']:.1f} ms, "
            f"p99 {latency['p99']:.1f} ms, max {latency['max']:.1f} ms\n"
            f"`allot submit`, a process each, over {args.cli_runs} runs: p50 {cli['p50']:.0f} ms, "
            f"p90 {cli['p90']:.0f} ms\n"
            f"intake: {throughput['submissions']:.0f} submissions in {throughput['seconds']:.2f} s "
            f"= {throughput['per_second']:.0f}/s (concurrency {args.concurrency}); "
            f"planner caught up {throughput['planner_caught_up_after_s']:.2f} s later, "
            f"{throughput['plans']:.0f} plans in the log"
        )
    return 0


async def submit_to_start(client: AsyncClient, jobs: int) -> dict[str, float]:
    spec = JobSpec(account="bench/latency", gpus=1, command=[sys.executable, "-c", "pass"])
    samples: list[float] = []
    for _ in range(jobs):
        reply = await client.submit(spec)
        assert reply.job_id is not None
        job = await client.wait(reply.job_id, timeout=30)
        if job.status != JobStatus.SUCCEEDED or job.started_at is None:
            raise RuntimeError(f"bench job {job.job_id} ended {job.status}")
        samples.append((job.started_at - job.submitted_at) / 1e6)
    return {
        "p50": statistics.median(samples),
        "p99": percentile(samples, 99),
        "max": max(samples),
        "jobs": float(jobs),
    }


async def cli_submit_wall(stack: Stack, runs: int) -> dict[str, float]:
    """Wall time of ``allot submit`` as a CI job runs it: a new process each time, from
    start to the job id printed (Python's start-up and imports included)."""
    env = {**os.environ, "ALLOT_NATS_URL": stack.url}
    for name, path in (("ALLOT_IDENTITY", stack.operator), ("ALLOT_TLS_CA", stack.tls_ca)):
        if path is None:
            env.pop(name, None)
        else:
            env[name] = str(path)
    command = [sys.executable, "-m", "allot.client.cli", "submit", "--gpus", "1",
               "--account", "bench/cli", "--", "true"]  # fmt: skip
    samples: list[float] = []
    for _ in range(runs):
        started = time.perf_counter()
        done = await asyncio.to_thread(
            subprocess.run, command, env=env, capture_output=True, text=True, timeout=60
        )
        samples.append((time.perf_counter() - started) * 1e3)
        if done.returncode != 0:
            raise RuntimeError(f"allot submit failed: {done.stderr.strip()[-500:]}")
    return {"p50": statistics.median(samples), "p90": percentile(samples, 90), "runs": runs}


async def intake_throughput(client: AsyncClient, total: int, concurrency: int) -> dict[str, float]:
    # Jobs that need more GPUs than are free stay queued, so only intake is measured.
    spec = JobSpec(account="bench/throughput", gpus=8, command=["true"])
    await client.submit(JobSpec(account="bench/throughput", gpus=8, command=["sleep", "3600"]))
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(total):
        queue.put_nowait(i)

    async def worker() -> None:
        while not queue.empty():
            queue.get_nowait()
            await client.submit(spec)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    seconds = time.perf_counter() - started
    # The planner keeps up when, soon after the burst, every queued job has its reason.
    async with asyncio.timeout(120):
        while True:
            state = await client.state()
            if all(state.jobs[j].reason is not None for j in state.pending):
                break
            await asyncio.sleep(0.1)
    caught_up = time.perf_counter() - started - seconds
    plans = sum(1 for r in await client.events.read() if r.type == "PlanComputed")
    return {
        "submissions": float(total),
        "seconds": seconds,
        "per_second": total / seconds,
        "planner_caught_up_after_s": caught_up,
        "plans": float(plans),
    }
