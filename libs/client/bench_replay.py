"""``allot bench replay``: how fast a log is folded and every plan in it verified.

The log is a seeded history written as an exported log file: 32 nodes of 8 GPUs, an
account tree of teams, batch jobs arriving every minute (about what the cluster serves),
started, charged by the ledger every minute while they run, and ending; and the plans the
real planner made for it, at every minute, from the state the log had then.
``allot replay --verify --log FILE`` is then timed: two passes over the file (the plans,
then everything), every event decoded and folded, every plan recomputed and compared.
"""

import argparse
import json
import random
import tempfile
import time
from pathlib import Path

import msgspec

from allot.bus.codec import encode
from allot.client.logfile import Line, read_log
from allot.core import DEFAULT_POLICY, PlanMemo, State, apply, plan, policy_hash
from allot.core.replay import verify
from allot.proto.events import (
    AccountDefined,
    AccountSettings,
    Event,
    GpuInfo,
    JobExited,
    JobSpec,
    JobStarted,
    JobSubmitted,
    Meta,
    NodeRegistered,
    PolicyAdopted,
    UsageCharged,
)
from allot.proto.subjects import PLAN_EVENTS, subject_for
from allot.services.runtime import code_version

S = 10**9
MINUTE = 60 * S


class _History:
    """Appends events to the file and folds them, as the services would have."""

    def __init__(self, path: Path):
        self.out = open(path, "wb")  # noqa: SIM115 (closed in write_history)
        self.state = State()
        self.encoder = msgspec.json.Encoder()

    def add(self, event: Event) -> None:
        seq = self.state.seq + 1
        apply(self.state, seq, event)
        line = Line(seq=seq, subject=subject_for(event), event=msgspec.Raw(encode(event)))
        self.out.write(self.encoder.encode(line) + b"\n")


def write_history(path: Path, events: int, seed: int) -> int:
    rng = random.Random(seed)
    log = _History(path)
    ids = iter(range(10**12))

    def meta(at: int) -> Meta:
        return Meta(id=f"e{next(ids)}", at=at, producer="bench")

    teams = [f"p{p}/t{t}" for p in range(4) for t in range(4)]
    for path_ in [f"p{p}" for p in range(4)] + teams:
        settings = AccountSettings(weight=rng.randint(1, 3))
        log.add(AccountDefined(meta=meta(0), path=path_, settings=settings))
    gpus = [GpuInfo(index=i, model="H100", memory_mib=81920) for i in range(8)]
    for n in range(32):
        node = f"n{n:02d}"
        log.add(NodeRegistered(meta=meta(0), node_id=node, hostname=node, gpus=gpus))
    version, hashed = code_version(), policy_hash(DEFAULT_POLICY)
    log.add(
        PolicyAdopted(
            meta=meta(0), name=DEFAULT_POLICY.name, policy_hash=hashed,
            policy_json=msgspec.json.encode(DEFAULT_POLICY).decode(),
        )
    )  # fmt: skip
    memo, now, job = PlanMemo(log.state), 0, 0
    ends: dict[str, int] = {}  # running job -> when it will exit
    while log.state.seq < events:
        now += MINUTE
        for job_id, end in sorted(ends.items()):
            if end <= now:
                del ends[job_id]
                for node in log.state.jobs[job_id].placements:
                    log.add(
                        JobExited(
                            meta=meta(end), job_id=job_id, node_id=node, exit_code=0,
                            output_path="-",
                        )
                    )  # fmt: skip
        for (job_id, attempt), run in sorted(log.state.unbilled.items()):
            to = run.until_ns if run.until_ns is not None else now
            if to > run.from_ns:
                log.add(
                    UsageCharged(
                        meta=meta(now), path=run.account, job_id=job_id, attempt=attempt,
                        from_ns=run.from_ns, to_ns=to,
                        gpu_ms=run.gpus * (to - run.from_ns) // 10**6,
                    )
                )  # fmt: skip
        for _ in range(rng.randint(0, 2)):  # about what the cluster can serve
            spec = JobSpec(
                account=rng.choice(teams), gpus=rng.choice([1, 1, 2, 4, 8]), command=["train"],
                max_runtime_ns=rng.randint(5, 240) * MINUTE,
            )  # fmt: skip
            log.add(JobSubmitted(meta=meta(now), job_id=f"j{job}", spec=spec))
            job += 1
        decided = plan(log.state, now, DEFAULT_POLICY, memo)
        if not decided.empty:
            log.add(
                decided.recorded(
                    meta(now), basis_seq=log.state.seq, now=now, policy=DEFAULT_POLICY.name,
                    policy_hash=hashed, code_version=version,
                )
            )  # fmt: skip
        for admission in decided.admissions:
            spec = log.state.jobs[admission.job_id].spec
            assert spec.max_runtime_ns is not None
            ends[admission.job_id] = now + rng.randint(1, spec.max_runtime_ns // MINUTE) * MINUTE
            for placement in admission.placements:
                log.add(
                    JobStarted(
                        meta=meta(now), job_id=admission.job_id, node_id=placement.node_id,
                        gpus=placement.gpus, pid=1, output_path="-",
                    )
                )  # fmt: skip
    log.out.close()
    assert not log.state.ignored, log.state.ignored[:3]
    return log.state.seq


def bench_replay(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "history.jsonl"
        started = time.perf_counter()
        written = write_history(path, args.events, args.seed)
        generated_s = time.perf_counter() - started
        started = time.perf_counter()
        result = verify(read_log(path, PLAN_EVENTS[:-1]), read_log(path), code_version())
        verify_s = time.perf_counter() - started
        size = path.stat().st_size
    report = {
        "events": result.events,
        "plans": result.plans,
        "divergences": len(result.divergences),
        "warnings": result.warnings,
        "seed": args.seed,
        "file_mib": round(size / 2**20, 1),
        "generate_s": round(generated_s, 2),
        "verify_s": round(verify_s, 2),
        "events_per_s": round(result.events / verify_s),
    }
    assert written == result.events
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
    else:
        print(
            f"replay --verify of {report['events']:,} events ({report['plans']:,} plans, "
            f"{report['file_mib']} MiB, seed {args.seed}): {verify_s:.1f} s = "
            f"{report['events_per_s']:,} events/s; {report['divergences']} divergences"
        )
    return 0 if not result.divergences else 1
