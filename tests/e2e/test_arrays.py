"""Job arrays end to end (docs/adr/0035): `allot submit --array` against a real stack, each
task run by a node agent with its index; status, explain and cancel on the array and on one
task; a resubmission with its key is the same array."""

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from allot.client import AsyncClient
from allot.client.stack import Stack
from allot.core.arrays import parse
from allot.proto.events import JobSpec
from allot.proto.queries import EXPLAIN, JOB, ExplainQuery, JobQuery


async def allot(stack: Stack, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ALLOT_NATS_URL": stack.url, "ALLOT_IDENTITY": str(stack.operator)}
    command = [sys.executable, "-m", "allot.client.cli", *argv]
    done = await asyncio.to_thread(
        subprocess.run, command, env=env, capture_output=True, text=True, timeout=120
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done


async def test_each_task_runs_once_with_its_index_and_the_array_is_seen_whole(
    stack: Stack, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    script = f'echo "$ALLOT_ARRAY_JOB_ID $ALLOT_ARRAY_TASK_COUNT" >> {out}/$ALLOT_ARRAY_INDEX'
    done = await allot(stack, "submit", "--gpus", "1", "--account", "demo", "--array",
                       "0-6:2,9%2", "--wait", "--json", "--", "sh", "-c", script)  # fmt: skip
    assert done.returncode == 0, done.stderr
    array = json.loads(done.stdout)
    assert array["by_status"] == {"succeeded": 5}
    array_id = array["array_id"]
    written = {p.name: p.read_text() for p in out.iterdir()}
    assert written == {str(i): f"{array_id} 5\n" for i in (0, 2, 4, 6, 9)}  # once each

    status = await allot(stack, "status", array_id, "--json")
    shown = json.loads(status.stdout)
    assert shown["array"]["indices"] == "0-6:2,9%2"
    assert [t["job_id"] for t in shown["tasks"]] == [f"{array_id}_{i}" for i in (0, 2, 4, 6, 9)]
    table = await allot(stack, "status", array_id)
    assert "5 succeeded" in table.stdout
    assert f"{array_id}_9" in table.stdout
    explained = await allot(stack, "explain", f"{array_id}_4", "--json")
    trail = [step["what"] for step in json.loads(explained.stdout)["trail"]]
    assert trail[0] == "submitted"  # the array's submission is the task's first step
    assert "started" in trail


async def test_cancel_one_task_then_the_array(client: AsyncClient) -> None:
    spec = JobSpec(account="demo", gpus=1, command=["sleep", "60"])
    reply = await client.submit(spec, array=parse("0-9%2"))
    array_id = reply.job_id
    assert array_id is not None

    async def glance() -> dict[str, Any]:
        return (await client.query(JOB, JobQuery(job_id=array_id))).data["array"]

    async def running(count: int) -> None:
        async with asyncio.timeout(30):
            while (await glance())["by_status"].get("running", 0) != count:
                await asyncio.sleep(0.2)

    await running(2)  # two at most, however many GPUs are free
    explained = (await client.query(EXPLAIN, ExplainQuery(job_id=array_id))).data
    assert explained["task"]["job_id"] == f"{array_id}_2"
    held = (await client.query(JOB, JobQuery(job_id=f"{array_id}_2"))).data
    assert held["reason"]["code"] == "ARRAY_LIMIT"

    await client.cancel(f"{array_id}_5")
    await client.cancel(f"{array_id}_0")  # running: stopped, and the next task starts
    async with asyncio.timeout(30):
        while (task := (await client.query(JOB, JobQuery(job_id=f"{array_id}_2"))).data)[
            "status"
        ] != "running":
            await asyncio.sleep(0.2)
    assert task["array_index"] == 2

    await client.cancel(array_id)
    ended = await client.wait_array(array_id, timeout=30)
    assert ended["by_status"] == {"cancelled": 10}
    assert ended["cancel_requested"]


async def test_a_resubmission_with_its_key_is_the_same_array(stack: Stack) -> None:
    argv = ("submit", "--gpus", "1", "--account", "demo", "--array", "0-2",
            "--idempotency-key", "sweep-1", "--json", "--", "true")  # fmt: skip
    first, again = json.loads((await allot(stack, *argv)).stdout), None
    again = json.loads((await allot(stack, *argv)).stdout)
    assert again["job_id"] == first["job_id"]
    assert again["duplicate"]
    other = await allot(stack, *[a if a != "0-2" else "0-3" for a in argv])
    assert other.returncode == 2
    assert "idempotency_key" in other.stderr
    bad = await allot(stack, "submit", "--gpus", "1", "--account", "demo", "--array", "5-1",
                      "--", "true")  # fmt: skip
    assert bad.returncode == 2
    assert "array.indices[0]='5-1': the last index is below the first" in bad.stderr
