"""``allot bench ledger``: how fast the ledger's accounting folds and ranks, on a synthetic
log made from a seed (so runs are comparable).

The log: an account tree (``--teams`` teams under a handful of programs), nodes, and jobs
that are submitted, admitted, started, charged once per accounting interval while they run,
and end; the same event mix the ledger folds in a busy cluster. Reported: fold rate of the
whole log (events/s), and the time to rank every account (fair share) and to find the due
charges at the end of it, as median and p99 over repeats.
"""

import argparse
import json
import random
import statistics
import time

from allot.client.bench import percentile
from allot.core import DEFAULT_POLICY, State, apply
from allot.core.charging import charges_due
from allot.core.fairshare import standings
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


def synthetic_log(events: int, teams: int, seed: int) -> list[Event]:
    rng = random.Random(seed)
    counter = iter(range(10**12))

    def meta(at: int) -> Meta:
        return Meta(id=f"e{next(counter)}", at=at, producer="bench")

    log: list[Event] = []
    programs = [f"org/p{i}" for i in range(max(1, teams // 8))]
    accounts = ["org", *programs] + [f"{rng.choice(programs)}/t{i}" for i in range(teams)]
    for path in sorted(accounts, key=lambda p: p.count("/")):
        log.append(
            AccountDefined(
                meta=meta(0), path=path, settings=AccountSettings(weight=rng.randint(1, 4))
            )
        )
    gpus = [GpuInfo(index=i, model="SIM", memory_mib=81920) for i in range(8)]
    nodes = [f"n{i}" for i in range(64)]
    for node in nodes:
        log.append(
            NodeRegistered(
                meta=meta(0), node_id=node, hostname=node, gpus=gpus, cpus=64, memory_mib=10**6
            )
        )
    leaves = accounts[1 + len(programs) :]
    now, job = 0, 0
    while len(log) < events:
        now += rng.randint(1, 30) * S
        job_id, node, account = f"j{job}", rng.choice(nodes), rng.choice(leaves)
        job += 1
        spec = JobSpec(account=account, gpus=1, command=["train"])
        runtime = rng.randint(60, 3600) * S
        log.append(JobSubmitted(meta=meta(now), job_id=job_id, spec=spec))
        placement = Placement(node_id=node, gpus=[0])
        log.append(
            PlanComputed(
                meta=meta(now), basis_seq=len(log), now=now, policy="bench", policy_hash="-",
                code_version="-", admissions=[Admission(job_id=job_id, placements=[placement])],
            )
        )  # fmt: skip
        log.append(
            JobStarted(
                meta=meta(now), job_id=job_id, node_id=node, gpus=[0], pid=1, output_path="-"
            )
        )
        charged = now
        while charged + 300 * S < now + runtime:  # one charge per 5-minute interval
            log.append(
                UsageCharged(
                    meta=meta(charged + 300 * S),
                    path=account,
                    job_id=job_id,
                    attempt=0,
                    from_ns=charged,
                    to_ns=charged + 300 * S,
                    gpu_ms=300_000,
                )
            )
            charged += 300 * S
        log.append(
            JobExited(
                meta=meta(now + runtime), job_id=job_id, node_id=node, exit_code=0, output_path="-"
            )
        )
        log.append(
            UsageCharged(
                meta=meta(now + runtime),
                path=account,
                job_id=job_id,
                attempt=0,
                from_ns=charged,
                to_ns=now + runtime,
                gpu_ms=(now + runtime - charged) // 10**6,
            )
        )
    return log[:events]


def bench_ledger(args: argparse.Namespace) -> int:
    log = synthetic_log(args.events, args.teams, args.seed)
    folds = []
    for _ in range(args.repeat):
        state = State()
        started = time.perf_counter()
        for seq, event in enumerate(log, start=1):
            apply(state, seq, event)
        folds.append(time.perf_counter() - started)
    assert not state.ignored, state.ignored[:3]
    now = max(e.meta.at for e in log)
    rank_ms, due_ms = [], []
    for _ in range(args.repeat * 10):
        started = time.perf_counter()
        ranks = standings(state, now, DEFAULT_POLICY.fair_share)
        rank_ms.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        charges_due(state, now, 300 * S)
        due_ms.append((time.perf_counter() - started) * 1000)
    fold_s = statistics.median(folds)
    result = {
        "events": len(log),
        "accounts": len(ranks),
        "jobs": len(state.jobs),
        "seed": args.seed,
        "fold_events_per_s": len(log) / fold_s,
        "fold_s": fold_s,
        "rank_ms_p50": statistics.median(rank_ms),
        "rank_ms_p99": percentile(rank_ms, 99),
        "charges_due_ms_p50": statistics.median(due_ms),
    }
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True))
    else:
        print(
            f"ledger fold: {result['events']} events ({result['jobs']} jobs, {result['accounts']} "
            f"accounts) in {fold_s:.2f} s = {result['fold_events_per_s']:,.0f} events/s\n"
            f"fair-share ranking: p50 {result['rank_ms_p50']:.2f} ms, "
            f"p99 {result['rank_ms_p99']:.2f} ms; "
            f"due charges: p50 {result['charges_due_ms_p50']:.2f} ms"
        )
    return 0
