"""GPU faults on a running stack of processes: a simulated GPU falls off the bus under a
job; its node is marked, drained and shown; the job moves; the metrics say so; an
operator's uncordon brings the node back."""

import asyncio
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from allot.client.stack import NodeShape, Stack
from allot.core import State
from allot.proto.events import JobSpec, JobStarted
from tests.stack import cli, python, running, until


def gauges(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def test_a_gpu_that_falls_off_the_bus_drains_its_node_and_its_job_moves(
    tmp_path: Path,
) -> None:
    nodes = [NodeShape(node_id="node-1", gpus=4), NodeShape(node_id="node-2", gpus=4)]
    stack = Stack(
        tmp_path / "allot", nodes, heartbeat_s=0.2, stop_grace_s=2, restart=False, metrics_port=0
    )
    async with stack, await stack.client() as client:
        spec = JobSpec(
            account="lab/a",
            gpus=4,
            resumable=True,
            command=python("import time; time.sleep(120)"),
        )
        reply = await client.submit(spec)
        job_id = reply.job_id
        assert job_id is not None
        state = await until(client, lambda s: running(s, job_id))
        [first] = state.jobs[job_id].placements
        other = "node-2" if first == "node-1" else "node-1"
        uuids = [g.uuid for g in state.nodes[first].gpus]
        [started] = [
            r.event
            for r in await client.events.read()
            if isinstance(r.event, JobStarted) and r.event.job_id == job_id
        ]
        assert isinstance(started, JobStarted)
        assert started.gpu_uuids == uuids

        with stack.fault_file(first).open("a") as faults:
            faults.write('{"gpu": 2, "xid": 79}\n')

        def moved(s: State) -> bool:
            return running(s, job_id) and other in s.jobs[job_id].placements

        state = await until(client, moved, timeout=30)
        node = state.nodes[first]
        assert sorted(node.gpu_faults) == [2]
        assert node.gpu_faults[2].kind == "xid"
        assert node.draining
        assert node.cordoned_by == "telemetry"
        assert state.jobs[job_id].attempts == 1

        listed = cli(stack, "nodes")
        assert listed.returncode == 0, listed.stderr
        [line] = [row for row in listed.stdout.splitlines() if row.startswith(first)]
        assert "2:xid" in line
        assert "drain (by telemetry): GPU 2: XID 79" in line
        shown = cli(stack, "nodes", "show", first)
        assert shown.returncode == 0, shown.stderr
        assert uuids[2] in shown.stdout
        assert "xid since" in shown.stdout
        unknown = cli(stack, "nodes", "show", "nope").stderr
        assert unknown.startswith("allot: node_id='nope': no such node (nodes: node-1, node-2)")
        # The faulty GPU, traced to every job that ran on it.
        traced = cli(stack, "nodes", "gpu", uuids[2][:12])
        assert traced.returncode == 0, traced.stderr
        assert f"GPU 2 of {first}: unhealthy (xid: XID 79" in traced.stdout
        [run] = [line for line in traced.stdout.splitlines() if job_id in line]
        tokens = run.split()
        at = tokens.index(job_id)
        assert tokens[at : at + 4] == [job_id, "0", first, "2"]  # job, attempt, node, GPU
        assert "no job has run" in cli(stack, "nodes", "gpu", "GPU-none").stdout
        several = cli(stack, "nodes", "gpu", "GPU-")
        assert several.returncode == 2
        assert "is the start of several GPUs' UUIDs" in several.stderr

        assert stack.metrics_url is not None
        url = stack.metrics_url
        async with asyncio.timeout(20):
            while True:
                scraped = gauges(url)
                key = ("allot_gpu_healthy", (("fault", "xid"), ("gpu", "2"), ("node", first),
                                            ("uuid", uuids[2])))  # fmt: skip
                temperature = ("allot_gpu_temperature_celsius", (("gpu", "0"), ("node", first)))
                if scraped.get(key) == 0 and temperature in scraped:
                    break
                await asyncio.sleep(0.2)
        assert scraped[temperature] == 35

        # Repaired: the operator uncordons it, and it takes work with all its GPUs again.
        done = cli(stack, "nodes", "uncordon", first)
        assert done.returncode == 0, done.stderr

        def repaired(s: State) -> bool:
            node = s.nodes.get(first)
            return node is not None and not node.cordoned and not node.gpu_faults

        state = await until(client, repaired)
        await asyncio.sleep(1.5)  # heartbeats go on: the XID is not reported again
        last = await client.events.last_seq()
        state = await until(client, lambda s: s.seq >= last)
        assert state.nodes[first].gpu_faults == {}
        assert state.nodes[first].free_gpus() == [0, 1, 2, 3]
