"""``allot up``: the whole system in the foreground until Ctrl-C."""

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

from allot.bus import traced
from allot.client import exitcodes
from allot.client.client import AsyncClient
from allot.client.session import allot_home, current_file
from allot.client.stack import NodeShape, Stack, parse_nodes, read_cluster
from allot.client.uplock import Held, Lock, holding
from allot.proto.events import JobSpec

DEMO_ACCOUNTS: dict[str, dict[str, Any]] = {
    "demo": {},  # for quick tries: allot submit --account demo ...
    "research": {"weight": 2},
    "research/alice": {},
    "research/bob": {},
    "platform": {},
    "platform/carol": {},
}
DEMO_JOBS = [
    (
        "hello",
        "research/alice",
        1,
        "print('hello from GPU', __import__('os').environ['CUDA_VISIBLE_DEVICES'])",
    ),
    (
        "finetune",
        "research/alice",
        4,
        "import time; [print('step', s, flush=True) or time.sleep(0.5) for s in range(10)]",
    ),
    ("eval-sweep", "research/bob", 2, "import time; time.sleep(3); print('accuracy 0.87')"),
    ("big-train", "platform/carol", 8, "import time; time.sleep(5); print('done')"),
    ("batch-infer", "platform/carol", 8, "import time; time.sleep(2); print('1000 prompts')"),
]
# Checkpoints every 10 steps and when asked to stop; resumes from its latest checkpoint.
TRAIN_CODE = """
import time
from allot import workload
state = workload.resume() or {"step": 0}
if state["step"]:
    print("resumed from step", state["step"], flush=True)
while state["step"] < 150:
    if workload.should_stop():
        workload.save(state)
        print("checkpointed at step", state["step"], "and stopped", flush=True)
        raise SystemExit(0)
    state = {"step": state["step"] + 1}
    if state["step"] % 10 == 0:
        workload.save(state)
    time.sleep(0.1)
print("trained 150 steps", flush=True)
"""
NOTEBOOK_CODE = "import time; time.sleep(2); print('notebook done')"
# A gang of one full node per worker (on two nodes when there are two), started at once.
GANG_CODE = (
    "import os, time; time.sleep(2); print('rank', os.environ['ALLOT_NODE_RANK'], 'of',"
    " os.environ['ALLOT_NUM_NODES'], 'done')"
)


async def up(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s up %(levelname)s %(message)s")
    try:
        nodes = read_cluster(args.cluster) if args.cluster else parse_nodes(args.nodes)
    except ValueError as error:
        print(f"allot: {error}", file=sys.stderr)
        return 2
    data_dir = args.data_dir or allot_home() / "data"
    try:
        with (
            holding(allot_home() / "up.lock", {}) as home,
            holding(data_dir / "up.lock", {}) as data,
        ):
            return await run(args, nodes, data_dir, [home, data])
    except Held as held:
        print(f"allot: {refusal(held)}", file=sys.stderr)
        return exitcodes.IN_USE


def refusal(held: Held) -> str:
    """Who holds what, and what to do: a second `allot up` would share the first one's store."""
    known = [f"pid {held.owner['pid']}"] if "pid" in held.owner else []
    known += [held.owner["nats_url"]] if held.owner.get("nats_url") else []
    who = f" ({', '.join(known)})" if known else ""
    return (
        f"another `allot up`{who} holds {held.path.parent}: stop it (Ctrl-C), or start this "
        "one with another --data-dir and ALLOT_HOME"
    )


async def run(args: argparse.Namespace, nodes: list[NodeShape], data_dir: Path,
              locks: list[Lock]) -> int:  # fmt: skip
    """Everything up, until a signal to stop; ``locks`` (held) are told the NATS URL."""
    stack = Stack(
        data_dir, nodes, node_timeout_s=args.node_timeout, secure=not args.insecure,
        tls=args.tls, metrics_port=args.metrics_port,
        dashboard_port=args.dashboard_port, nats_cluster=args.nats_cluster,
        # Signed-in users act from the dashboard as themselves: only with identities.
        websocket=args.dashboard_port is not None and not args.insecure,
    )  # fmt: skip
    stopped = asyncio.Event()
    demo_task: asyncio.Task[None] | None = None
    loop = asyncio.get_running_loop()
    # SIGHUP too: a closed terminal stops everything as Ctrl-C does, jobs included.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(sig, stopped.set)
    await stack.start()  # stops whatever it started if it fails
    try:
        where = {
            "nats_url": stack.url,
            "nats_data_dirs": [str(server.data_dir) for server in stack.nats_servers],
            "data_dir": str(stack.data_dir),
            "pid": os.getpid(),
            "identity": str(stack.operator) if stack.operator else None,
            "tls_ca": str(stack.tls_ca) if stack.tls_ca else None,
            "metrics_url": stack.metrics_url,
            "dashboard_url": stack.dashboard_url,
        }
        for lock in locks:
            lock.note(nats_url=stack.url)
        current_file().parent.mkdir(parents=True, exist_ok=True)
        current_file().write_text(json.dumps(where))
        announce(args, stack)
        if args.demo:
            largest = max(n.gpus for n in stack.nodes)
            demo = submit_demo(stack, largest, as_json=args.json)
            demo_task = asyncio.create_task(demo)
        await stopped.wait()
    finally:
        if demo_task is not None:
            demo_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await demo_task
        with contextlib.suppress(OSError):  # the terminal may be gone
            print("stopping…", file=sys.stderr, flush=True)
        await stack.stop()
        with contextlib.suppress(FileNotFoundError):
            current_file().unlink()
    return 0


def announce(args: argparse.Namespace, stack: Stack) -> None:
    gpus = sum(n.gpus for n in stack.nodes)
    if args.json:
        up = {"nats_url": stack.url, "data_dir": str(stack.data_dir), "logs": str(stack.logs),
              "metrics_url": stack.metrics_url, "dashboard_url": stack.dashboard_url}  # fmt: skip
        print(json.dumps({**up, "nodes": len(stack.nodes), "gpus": gpus}), flush=True)
        return
    print(
        f"Allot is up: {len(stack.nodes)} simulated nodes, {gpus} GPUs.\n"
        f"  NATS      {stack.url}   (export ALLOT_NATS_URL={stack.url})\n"
        f"  data      {stack.data_dir}\n"
        f"  logs      {stack.logs}\n"
        f"  identity  {stack.operator or 'none: --insecure, anyone may do anything'}"
        f"   (this CLI's, as operator)\n"
        f"  TLS       {stack.tls_ca or 'off (--tls turns it on)'}"
        f"{'   (clients: export ALLOT_TLS_CA=it)' if stack.tls_ca else ''}\n"
        f"  dashboard {stack.dashboard_url or 'off'}   (sign in with an identity to act)\n"
        f"  metrics   {stack.metrics_url or 'off'}   (point a browser or Prometheus at it)\n"
        f"  traces    {tracing_said()}\n"
        f"Users: allot users add NAME [--admin] makes an identity; name it in an account's\n"
        f"     members (allot accounts apply) and run the CLI with ALLOT_IDENTITY=its file.\n"
        f"Try: allot submit --gpus 1 --account demo --wait -- python -c 'print(42)'\n"
        f"     allot status | allot queue | allot nodes | allot log tail\n"
        f"Ctrl-C stops everything.",
        flush=True,
    )


def tracing_said() -> str:
    if traced.exporting():
        return "exported over OTLP, as OTEL_* say; also: allot trace JOB"
    return "allot trace JOB (set OTEL_EXPORTER_OTLP_ENDPOINT to export them too)"


async def submit_demo(stack: Stack, largest_node: int, as_json: bool) -> None:
    """A small mixed workload; jobs asking for more than the largest node get that node."""
    nodes = len(stack.nodes)
    async with await stack.client() as client:
        await client.apply_accounts(DEMO_ACCOUNTS)
        for name, account, asked, code in DEMO_JOBS:
            gpus = min(asked, largest_node)
            spec = JobSpec(
                account=account, gpus=gpus, name=name, command=[sys.executable, "-c", code]
            )
            reply = await client.submit(spec)
            announce_demo(name, f"{gpus} GPUs", reply.job_id, as_json)
        workers = min(2, nodes)
        gang = JobSpec(
            account="research/bob",
            name="ddp-pretrain",
            workers=workers,
            gpus=largest_node,
            max_runtime_ns=3600 * 10**9,
            command=[sys.executable, "-c", GANG_CODE],
        )
        reply = await client.submit(gang)
        announce_demo(gang.name, f"{workers}x{largest_node} GPUs", reply.job_id, as_json)
        train = JobSpec(
            account="research/alice",
            name="resumable-train",
            gpus=largest_node,
            resumable=True,
            command=[sys.executable, "-c", TRAIN_CODE],
        )
        reply = await client.submit(train)
        announce_demo(train.name, f"{largest_node} GPUs", reply.job_id, as_json)
        assert reply.job_id is not None
        await show_preemption(client, reply.job_id, largest_node, nodes, as_json)


async def show_preemption(
    client: AsyncClient, train: str, gpus: int, nodes: int, as_json: bool
) -> None:
    """Once the training job has checkpointed and runs alone, an interactive job that
    needs the whole cluster arrives: the training job is stopped, requeued and resumes
    from its checkpoint."""
    notebook: str | None = None
    told: set[str] = set()

    def say(key: str, text: str) -> None:
        if key not in told:
            told.add(key)
            print(
                json.dumps({"demo": key, "text": text}) if as_json else f"demo: {text}", flush=True
            )

    async with contextlib.aclosing(client.states()) as states:
        async for state in states:
            job = state.jobs.get(train)
            if job is None:
                continue
            alone = set(state.holders) == {train}
            if notebook is None and job.checkpoint_step >= 1 and alone:
                spec = JobSpec(
                    account="demo", name="notebook", gpus=gpus, workers=nodes,
                    tier="interactive", command=[sys.executable, "-c", NOTEBOOK_CODE],
                )  # fmt: skip
                notebook = (await client.submit(spec)).job_id
                shape = f"{nodes}x{gpus}"
                say("notebook", f"an interactive notebook ({shape} GPUs) arrives as {notebook}")
            if job.preemptions:
                say(
                    "preempted",
                    f"resumable-train was preempted for it at checkpoint {job.checkpoint_step}, "
                    f"losing {job.lost_gpu_ms / 1000:.1f} GPU-s, and requeued",
                )
            if job.status.terminal:
                say("ended", f"resumable-train {job.status} after {job.preemptions} preemption(s)")
                return


def announce_demo(name: str, shape: str, job_id: str | None, as_json: bool) -> None:
    if as_json:
        print(json.dumps({"demo": name, "gpus": shape, "job_id": job_id}), flush=True)
    else:
        print(f"demo: submitted {name} ({shape}) as {job_id}", flush=True)
