"""``allot bench planner``: how long one planning cycle takes on a large, busy cluster, built
from a seed so runs are comparable.

The cluster: ``--nodes`` nodes of 8 GPUs in racks of 8 (three H100 nodes to one A100; half
the nodes with two NVLink islands of 4, half with one of 8), an account tree of programs
with GPU quotas and borrowing limits over teams with usage history, and running jobs that
fill about 90% of the GPUs, most with a declared ``max_runtime``. The queue: ``--pending``
jobs (several sizes may be given) of 1 to 8 GPUs and gangs of up to 8 workers, over all
tiers and topologies, some with a flavor. Reported per queue size: the cycle's median and
p99 over ``--repeat`` cycles on the same snapshot with a warm fair-share memo (as in the
planner service, which also keeps the garbage collector off its folded state), the first
(cold) cycle, and what the plan decided.
"""

import argparse
import gc
import json
import random
import statistics
import time
from collections import Counter
from typing import Any

from allot.client.bench import percentile
from allot.core import DEFAULT_POLICY, PlanMemo, State, apply, plan, validate_submission
from allot.proto.commands import SubmitRequest
from allot.proto.events import (
    AccountDefined,
    AccountSettings,
    Admission,
    Event,
    GpuInfo,
    JobExited,
    JobSpec,
    JobStarted,
    JobSubmitted,
    Meta,
    NodeRegistered,
    Placement,
    PlanComputed,
    UsageCharged,
)

S = 10**9
HOUR = 3600 * S
NOW = 1_000 * HOUR
GPUS_PER_NODE = 8
PROGRAMS = 8
TEAMS_PER_PROGRAM = 8


class _Log:
    def __init__(self) -> None:
        self.events: list[Event] = []

    def meta(self, at: int) -> Meta:
        return Meta(id=f"e{len(self.events)}", at=at, producer="bench")

    def add(self, event: Event) -> None:
        self.events.append(event)


def busy_cluster(nodes: int, pending: int, seed: int) -> State:
    rng = random.Random(seed)
    log = _Log()
    capacity = nodes * GPUS_PER_NODE
    leaves = _accounts(log, capacity, rng)
    free = _nodes(log, nodes)
    _history(log, leaves, rng)
    _running(log, free, leaves, rng)
    state = State()
    for seq, event in enumerate(log.events, start=1):
        apply(state, seq, event)
    for n in range(pending):
        spec = _shape(rng, leaves)
        while validate_submission(SubmitRequest(spec=spec), state):
            spec = _shape(rng, leaves)  # the queue holds only what intake would take
        submitted = NOW - rng.randint(0, 48) * HOUR
        apply(
            state, state.seq + 1, JobSubmitted(meta=log.meta(submitted), job_id=f"q{n}", spec=spec)
        )
    assert not state.ignored, state.ignored[:3]
    return state


def _accounts(log: _Log, capacity: int, rng: random.Random) -> list[str]:
    leaves = []
    for p in range(PROGRAMS):
        quota = capacity // PROGRAMS
        program = AccountSettings(
            weight=rng.randint(1, 4),
            quota={"gpu": quota},
            borrowing_limit={"gpu": quota},
            lending_limit={"gpu": quota * 3 // 4},
        )
        log.add(AccountDefined(meta=log.meta(0), path=f"p{p}", settings=program))
        for t in range(TEAMS_PER_PROGRAM):
            path = f"p{p}/t{t}"
            log.add(
                AccountDefined(
                    meta=log.meta(0), path=path, settings=AccountSettings(weight=rng.randint(1, 3))
                )
            )
            leaves.append(path)
    return leaves


def _history(log: _Log, leaves: list[str], rng: random.Random) -> None:
    """A week of past work per team, charged every 6 hours, so fair-share ranks differ."""
    for n, path in enumerate(leaves):
        job_id, begin = f"past{n}", NOW - 168 * HOUR
        spec = JobSpec(account=path, gpus=1, command=["train"])
        log.add(JobSubmitted(meta=log.meta(begin), job_id=job_id, spec=spec))
        admission = Admission(job_id=job_id, placements=[Placement(node_id="n0000", gpus=[0])])
        log.add(
            PlanComputed(
                meta=log.meta(begin), basis_seq=0, now=begin, policy="bench", policy_hash="-",
                code_version="-", admissions=[admission],
            )
        )  # fmt: skip
        log.add(
            JobStarted(
                meta=log.meta(begin), job_id=job_id, node_id="n0000", gpus=[0], pid=1,
                output_path="-",
            )
        )  # fmt: skip
        for start in range(begin, NOW - 6 * HOUR, 6 * HOUR):
            log.add(
                UsageCharged(
                    meta=log.meta(start + 6 * HOUR), path=path, job_id=job_id, attempt=0,
                    from_ns=start, to_ns=start + 6 * HOUR,
                    gpu_ms=rng.randint(0, 64) * 6 * 3_600_000,
                )
            )  # fmt: skip
        log.add(
            JobExited(
                meta=log.meta(NOW - 6 * HOUR), job_id=job_id, node_id="n0000", exit_code=0,
                output_path="-",
            )
        )  # fmt: skip


def _nodes(log: _Log, nodes: int) -> dict[str, list[int]]:
    free = {}
    for n in range(nodes):
        node_id = f"n{n:04d}"
        model = "A100" if n % 4 == 3 else "H100"
        islands = [[0, 1, 2, 3], [4, 5, 6, 7]] if n % 2 else [list(range(GPUS_PER_NODE))]
        log.add(
            NodeRegistered(
                meta=log.meta(0),
                node_id=node_id,
                hostname=node_id,
                gpus=[GpuInfo(index=i, model=model, memory_mib=81920) for i in range(8)],
                labels={"rack": f"rack-{n // 8:03d}"},
                nvlink_islands=islands,
            )
        )
        free[node_id] = list(range(GPUS_PER_NODE))
    return free


def _running(log: _Log, free: dict[str, list[int]], leaves: list[str], rng: random.Random) -> None:
    """Fill about 90% of the GPUs with running jobs, one node at a time."""
    n = 0
    for node_id, gpus in free.items():
        while len(gpus) > (1 if rng.random() < 0.8 else 0):
            count = min(len(gpus), rng.choice([1, 1, 2, 4, 8]))
            taken, gpus[:] = gpus[:count], gpus[count:]
            job_id = f"r{n}"
            n += 1
            ran = rng.randint(1, 8 * 3600) * S
            started = NOW - ran
            # Declared runtimes are kept (the executor enforces them): 30 min to a day left.
            runtime = None if rng.random() < 0.2 else ran + rng.randint(1, 48) * 1800 * S
            spec = JobSpec(
                account=rng.choice(leaves), gpus=count, command=["train"], max_runtime_ns=runtime
            )
            log.add(JobSubmitted(meta=log.meta(started), job_id=job_id, spec=spec))
            admission = Admission(
                job_id=job_id, placements=[Placement(node_id=node_id, gpus=taken)]
            )
            log.add(
                PlanComputed(
                    meta=log.meta(started), basis_seq=0, now=started, policy="bench",
                    policy_hash="-", code_version="-", admissions=[admission],
                )
            )  # fmt: skip
            log.add(
                JobStarted(
                    meta=log.meta(started), job_id=job_id, node_id=node_id, gpus=taken, pid=1,
                    output_path="-",
                )
            )  # fmt: skip


def _shape(rng: random.Random, leaves: list[str]) -> JobSpec:
    roll = rng.random()
    if roll < 0.85:
        workers, gpus = 1, rng.choice([1, 1, 1, 2, 2, 4, 8])
    else:
        workers, gpus = rng.choice([2, 4, 8]), rng.choice([4, 8])
    return JobSpec(
        account=rng.choice(leaves),
        gpus=gpus,
        workers=workers,
        command=["train"],
        tier=rng.choice(["interactive", "batch", "batch", "batch", "best-effort"]),
        # A gang spans nodes (8-GPU nodes cannot hold 2 x 8), so it asks for a rack or any.
        topology=rng.choice(["nvlink", "node", "rack", "any"] if workers == 1 else ["rack", "any"]),
        flavor=rng.choice([None, None, None, "H100", "A100"]),
        max_runtime_ns=None if rng.random() < 0.3 else rng.randint(1, 24) * 1800 * S,
    )


def measure(state: State, repeat: int) -> dict[str, Any]:
    gc.collect()
    gc.freeze()  # as the planner service does with its folded state
    started = time.perf_counter()
    decided = plan(state, NOW, DEFAULT_POLICY)
    cold_ms = (time.perf_counter() - started) * 1000
    memo = PlanMemo(state)
    timings = []
    for _ in range(repeat):
        started = time.perf_counter()
        plan(state, NOW, DEFAULT_POLICY, memo)  # dropped at once, as the service drops it
        timings.append((time.perf_counter() - started) * 1000)
    return {
        "pending": len(state.pending),
        "cycle_ms_p50": statistics.median(timings),
        "cycle_ms_p99": percentile(timings, 99),
        "cold_cycle_ms": cold_ms,
        "admitted": len(decided.admissions),
        "looked_at": len(decided.waiting) + len(decided.admissions),
        # Every job is new to this state: each gets a reason (QUEUED past where it stopped).
        "reasons": dict(sorted(Counter(r.code for r in decided.pending).items())),
        "reservation": decided.reservation is not None,
    }


def bench_planner(args: argparse.Namespace) -> int:
    runs = []
    for pending in args.pending:
        state = busy_cluster(args.nodes, pending, args.seed)
        runs.append(measure(state, args.repeat))
    used = sum(len(n.allocated) for n in state.nodes.values())
    result = {
        "nodes": args.nodes,
        "gpus": args.nodes * GPUS_PER_NODE,
        "gpus_in_use": used,
        "seed": args.seed,
        "repeat": args.repeat,
        "runs": runs,
    }
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True))
        return 0
    print(
        f"planning cycle on {args.nodes} nodes x {GPUS_PER_NODE} GPUs "
        f"({used} in use), seed {args.seed}, {args.repeat} cycles each:"
    )
    for run in runs:
        print(
            f"  {run['pending']:>7} pending: p50 {run['cycle_ms_p50']:8.1f} ms  "
            f"p99 {run['cycle_ms_p99']:8.1f} ms  (cold {run['cold_cycle_ms']:.1f} ms; "
            f"{run['admitted']} admitted; {run['reasons']})"
        )
    return 0
