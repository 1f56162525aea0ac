"""Gangs through the real services: one process per node, started together, ended together."""

import json
from pathlib import Path

from allot.client import AsyncClient
from allot.client.stack import Stack
from allot.core import JobStatus
from allot.proto.events import JobSpec
from tests.stack import cli, gone, python, running, until

# Each node's process writes what it learned of its gang, then exits (or waits on a file).
REPORT = (
    "import json, os, sys, time\n"
    "keys = ['ALLOT_NODE_RANK', 'ALLOT_NUM_NODES', 'ALLOT_LEAD_HOST', 'ALLOT_WORKERS',\n"
    "        'ALLOT_GPUS_PER_WORKER', 'ALLOT_LOCAL_WORKERS', 'CUDA_VISIBLE_DEVICES']\n"
    "out = os.path.join(os.environ['OUT'], os.environ['ALLOT_NODE_ID'])\n"
    "json.dump({k: os.environ[k] for k in keys} | {'pid': os.getpid()}, open(out, 'w'))\n"
    "if os.environ['ALLOT_NODE_RANK'] == os.environ.get('FAIL_RANK'):\n"
    "    time.sleep(0.5); sys.exit(3)\n"
    "time.sleep(float(os.environ.get('HOLD', '0')))\n"
)


async def test_a_gang_too_big_for_one_node_runs_on_both_at_once(
    client: AsyncClient, tmp_path: Path
) -> None:
    spec = JobSpec(
        account="lab/a", workers=3, gpus=2, command=python(REPORT), env={"OUT": str(tmp_path)}
    )
    reply = await client.submit(spec)
    assert reply.job_id is not None
    job = await client.wait(reply.job_id, timeout=20)

    assert job.status == JobStatus.SUCCEEDED
    # Best fit: the roomiest node first (two workers), the last worker where it fits.
    assert job.placements == {"node-1": [0, 1, 2, 3], "node-2": [0, 1]}
    lead = json.loads((tmp_path / "node-1").read_text())
    other = json.loads((tmp_path / "node-2").read_text())
    assert (lead["ALLOT_NODE_RANK"], other["ALLOT_NODE_RANK"]) == ("0", "1")
    assert lead["ALLOT_NUM_NODES"] == other["ALLOT_NUM_NODES"] == "2"
    assert lead["ALLOT_LEAD_HOST"] == other["ALLOT_LEAD_HOST"]
    assert (lead["ALLOT_LOCAL_WORKERS"], other["ALLOT_LOCAL_WORKERS"]) == ("2", "1")
    assert (lead["CUDA_VISIBLE_DEVICES"], other["CUDA_VISIBLE_DEVICES"]) == ("0,1,2,3", "0,1")
    assert sorted(job.started_on) == ["node-1", "node-2"]
    assert job.exited_on == {"node-1": 0, "node-2": 0}
    state = await client.state()
    assert all(not node.allocated for node in state.nodes.values())


async def test_a_failing_process_ends_the_gang_and_its_other_process_is_killed(
    client: AsyncClient, tmp_path: Path
) -> None:
    spec = JobSpec(
        account="lab/a",
        workers=3,
        gpus=2,
        command=python(REPORT),
        env={"OUT": str(tmp_path), "FAIL_RANK": "1", "HOLD": "60"},
    )
    reply = await client.submit(spec)
    assert reply.job_id is not None
    job = await client.wait(reply.job_id, timeout=20)

    assert job.status == JobStatus.FAILED
    assert job.exit_code == 3
    assert "on node-2" in job.end_reason
    # The lead's process would have slept a minute: its agent kills it as the job ended.
    await gone(json.loads((tmp_path / "node-1").read_text())["pid"])


async def test_a_gang_waits_whole_while_only_part_of_it_fits(
    stack: Stack, client: AsyncClient
) -> None:
    blocker = await client.submit(
        JobSpec(account="lab/a", gpus=2, command=python("import time; time.sleep(60)"))
    )
    assert blocker.job_id is not None
    blocker_id = blocker.job_id
    await until(client, lambda s: running(s, blocker_id))
    gang = await client.submit(JobSpec(account="lab/a", workers=3, gpus=2, command=["true"]))
    assert gang.job_id is not None
    gang_id = gang.job_id
    state = await until(client, lambda s: gang_id in s.jobs and s.jobs[gang_id].reason is not None)
    assert state.jobs[gang_id].placements == {}
    assert state.jobs[gang_id].reason.code in ("NO_FIT", "BEHIND")  # type: ignore[union-attr]
    shown = cli(stack, "status").stdout
    assert "3x2" in shown
    assert cli(stack, "cancel", blocker_id).returncode == 0
    done = await client.wait(gang_id, timeout=20)
    assert done.status == JobStatus.SUCCEEDED
