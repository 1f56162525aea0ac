"""Fair share with the real services: teams of weights 2:1:1 that keep the queue full get
GPU time 2:1:1, and a team that was idle gets the next free GPUs."""

import asyncio
import contextlib
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from allot.client import AsyncClient
from allot.client.stack import NodeShape, Stack
from allot.core import JobStatus, State
from allot.proto.events import JobSpec, PlanComputed

WEIGHTS = {"lab/a": 2, "lab/b": 1, "lab/c": 1}
JOB = [sys.executable, "-c", "import time; time.sleep(0.3)"]
RUN_S = 40.0


@pytest.mark.slow
async def test_busy_teams_get_gpu_time_in_proportion_to_their_weights(tmp_path: Path) -> None:
    stack = Stack(
        tmp_path / "allot",
        [NodeShape(node_id="node-1", gpus=4)],
        accounting_interval_s=0.5,
        restart=False,
    )
    async with stack, await stack.client() as client:
        tree = {"lab": {}, "lab/idle": {}} | {team: {"weight": w} for team, w in WEIGHTS.items()}
        await client.apply_accounts(tree)
        latest = State()

        async def follow() -> None:
            nonlocal latest
            async with contextlib.aclosing(client.states()) as states:
                async for state in states:
                    latest = state

        following = asyncio.create_task(follow())
        try:
            await keep_queues_full(client, lambda: latest, RUN_S)
            for job_id in list(latest.pending):
                await client.cancel(job_id)
            async with asyncio.timeout(30):
                while latest.unbilled or any(not j.status.terminal for j in latest.jobs.values()):
                    await asyncio.sleep(0.1)
            delivered = {team: latest.usage[team].total_gpu_ms for team in WEIGHTS}

            # A team idle so far submits while the others keep the cluster full.
            await keep_queues_full(client, lambda: latest, 1.0)
            idle = await client.submit(JobSpec(account="lab/idle", gpus=1, command=JOB))
            await keep_queues_full(client, lambda: latest, 2.0)
            records = await client.events.read()
        finally:
            following.cancel()

    total = sum(delivered.values())
    weight_sum = sum(WEIGHTS.values())
    ratios = {team: delivered[team] / total / (WEIGHTS[team] / weight_sum) for team in WEIGHTS}
    print(f"delivered GPU-ms {delivered}; delivered/target {ratios}")
    for team, ratio in ratios.items():
        assert abs(ratio - 1) <= 0.05, f"{team} got {ratio:.3f} of its share"

    submitted_at = next(r.seq for r in records if idle.job_id in r.subject)
    first_admission = next(
        r.event.admissions[0].job_id
        for r in records
        if r.seq > submitted_at and isinstance(r.event, PlanComputed) and r.event.admissions
    )
    assert first_admission == idle.job_id


async def keep_queues_full(client: AsyncClient, state: Callable[[], State], seconds: float) -> None:
    """Keep four jobs of every busy team pending for ``seconds``."""
    deadline = asyncio.get_running_loop().time() + seconds
    submitted: dict[str, set[str]] = {team: set() for team in WEIGHTS}
    while asyncio.get_running_loop().time() < deadline:
        current = state()
        for team in WEIGHTS:
            waiting = [
                j for j in submitted[team]
                if j not in current.jobs or current.jobs[j].status == JobStatus.PENDING
            ]  # fmt: skip
            for _ in range(4 - len(waiting)):
                reply = await client.submit(JobSpec(account=team, gpus=1, command=JOB))
                assert reply.job_id is not None
                submitted[team].add(reply.job_id)
            submitted[team] = {
                j
                for j in submitted[team]
                if j not in current.jobs or not current.jobs[j].status.terminal
            }
        await asyncio.sleep(0.05)
