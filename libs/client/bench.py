"""``allot bench stack``: submit-to-start latency on an idle stack, the wall time of a cold
``allot submit`` process (with and without ``--wait``), a job array's submission, and
sustained intake throughput.

It starts its own stack in a temporary directory, so the numbers do not depend on what else
runs. Latency is measured from the ``at`` of ``JobSubmitted`` (stamped by intake) to the
``at`` of ``JobStarted`` (stamped by the node agent), and to the job's first instruction
(the time its command prints as it begins), one job at a time. An array's submission is
timed to its acknowledgement and to the read model showing every task. Throughput is the
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
from allot.proto.events import ArrayTasks, IndexRange, JobSpec, PlanComputed
from allot.proto.queries import JOB, JobQuery

_SUBMISSIONS = {"JobSubmitted", "JobsSubmitted"}  # the record types a burst appends


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
                latency, first = await submit_to_start(client, args.jobs)
                cli = await cli_submit_wall(stack, args.cli_runs)
                cli_wait = await cli_submit_wall(stack, args.cli_runs, wait=True)
                array = await array_submit(client, args.array_tasks)
                throughput = await intake_throughput(client, args.burst, args.concurrency)
        finally:
            await stack.stop()
    result = {"submit_to_start_ms": latency, "submit_to_first_instruction_ms": first,
              "cli_submit_ms": cli, "cli_submit_wait_ms": cli_wait, "array": array,
              "intake": throughput}  # fmt: skip
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True))
    else:
        print(
            f"submit→start over {args.jobs} jobs: p50 {latency['p50']:.1f} ms, "
            f"p99 {latency['p99']:.1f} ms, max {latency['max']:.1f} ms\n"
            f"submit→first instruction: p50 {first['p50']:.1f} ms, p99 {first['p99']:.1f} ms\n"
            f"`allot submit`, a process each, over {args.cli_runs} runs: p50 {cli['p50']:.0f} ms, "
            f"p90 {cli['p90']:.0f} ms\n"
            f"`allot submit --wait -- true`, the same: p50 {cli_wait['p50']:.0f} ms, "
            f"p90 {cli_wait['p90']:.0f} ms\n"
            f"an array of {args.array_tasks} tasks: acknowledged in {array['acknowledged_ms']:.0f} "
            f"ms, every task shown by the read model after {array['shown_ms']:.0f} ms\n"
            f"intake: {throughput['submissions']:.0f} submissions in {throughput['seconds']:.2f} s "
            f"= {throughput['per_second']:.0f}/s (concurrency {args.concurrency}); "
            f"planner caught up {throughput['planner_caught_up_after_s']:.2f} s later, "
            f"{throughput['plans']:.0f} plans in the log"
        )
    return 0


async def submit_to_start(
    client: AsyncClient, jobs: int
) -> tuple[dict[str, float], dict[str, float]]:
    """Submission to ``JobStarted``, and to the first instruction of the job's command
    (``date`` printing the time as it begins), one trivial job at a time."""
    spec = JobSpec(account="bench/latency", gpus=1, command=["date", "+%s%N"])
    started: list[float] = []
    first: list[float] = []
    for _ in range(jobs):
        reply = await client.submit(spec)
        assert reply.job_id is not None
        job = await client.wait(reply.job_id, timeout=30)
        if job.status != JobStatus.SUCCEEDED or job.started_at is None or not job.output_path:
            raise RuntimeError(f"bench job {job.job_id} ended {job.status}")
        began = int(Path(job.output_path).read_text().split()[-1])
        started.append((job.started_at - job.submitted_at) / 1e6)
        first.append((began - job.submitted_at) / 1e6)
    return _spread(started, jobs), _spread(first, jobs)


def _spread(samples: list[float], jobs: int) -> dict[str, float]:
    return {
        "p50": statistics.median(samples),
        "p99": percentile(samples, 99),
        "max": max(samples),
        "jobs": float(jobs),
    }


async def array_submit(client: AsyncClient, tasks: int) -> dict[str, float]:
    """One array of ``tasks`` tasks that cannot start (each wants more GPUs than there are
    free): until the intake acknowledges it, and until the read model shows every task."""
    spec = JobSpec(account="bench/array", gpus=8, command=["true"], max_runtime_ns=10**9)
    began = time.perf_counter()
    reply = await client.submit(
        spec, array=ArrayTasks(indices=[IndexRange(first=0, last=tasks - 1)])
    )
    acknowledged = time.perf_counter() - began
    assert reply.job_id is not None
    async with asyncio.timeout(60):
        while True:
            view = (await client.query(JOB, JobQuery(job_id=reply.job_id))).data["array"]
            if view["tasks"] == tasks:
                break
            await asyncio.sleep(0.01)
    shown = time.perf_counter() - began
    await client.cancel(reply.job_id)  # out of the throughput run's way
    return {"tasks": float(tasks), "acknowledged_ms": acknowledged * 1e3, "shown_ms": shown * 1e3}


async def cli_submit_wall(stack: Stack, runs: int, wait: bool = False) -> dict[str, float]:
    """Wall time of ``allot submit`` as a CI job runs it: a new process each time, from
    start to the job id printed (Python's start-up and imports included); with ``wait``,
    to the end of the job (``true``)."""
    env = {**os.environ, "ALLOT_NATS_URL": stack.url}
    for name, path in (("ALLOT_IDENTITY", stack.operator), ("ALLOT_TLS_CA", stack.tls_ca)):
        if path is None:
            env.pop(name, None)
        else:
            env[name] = str(path)
    command = [sys.executable, "-m", "allot.client.cli", "submit", "--gpus", "1",
               "--account", "bench/cli", *(["--wait"] if wait else []), "--", "true"]  # fmt: skip
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
    # Every GPU is held first, so the burst's jobs stay queued: what is measured is intake
    # and the services folding submissions, not nodes starting a job after another.
    nodes = (await client.state()).nodes.values()
    blockers = []
    for gpus in [len(node.gpus) for node in nodes if not node.lost]:
        blocker = JobSpec(account="bench/throughput", gpus=gpus, command=["sleep", "3600"])
        reply = await client.submit(blocker)
        assert reply.job_id is not None  # submit raises on a refusal
        blockers.append(reply.job_id)
    async with asyncio.timeout(60):
        while not all(
            job is not None and job.status == JobStatus.RUNNING
            for job in [await client.job(job_id) for job_id in blockers]
        ):
            await asyncio.sleep(0.1)
    spec = JobSpec(account="bench/throughput", gpus=1, command=["true"])
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
    ended_ns = time.time_ns()
    # The planner keeps up when, soon after the burst, every queued job has its reason:
    # how soon is told by the stamp of the plan that first folded the burst's last
    # submission (the planner's clock: on another machine, off by the clocks' skew).
    async with asyncio.timeout(120):
        while True:
            state = await client.state()
            if all(state.jobs[j].reason is not None for j in state.pending):
                break
            await asyncio.sleep(0.1)
    records = await client.events.read()
    last_submitted = max(r.seq for r in records if r.type in _SUBMISSIONS)
    plans = [r.event for r in records if isinstance(r.event, PlanComputed)]
    covering = next((p for p in plans if p.basis_seq >= last_submitted), plans[-1])
    return {
        "submissions": float(total),
        "seconds": seconds,
        "per_second": total / seconds,
        "planner_caught_up_after_s": max(0.0, (covering.meta.at - ended_ns) / 1e9),
        "plans": float(len(plans)),
    }
