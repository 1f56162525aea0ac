"""``allot bench chaos``: kill -9 every kind of Allot process under load, then check the
log (``allot.client.chaos``). Exits 1 if any invariant was broken or any killed process did
not come back; the figures say how much was survived."""

import argparse
import json
import logging
import sys
import tempfile
from pathlib import Path

import msgspec

from allot.client.chaos import ACKNOWLEDGED, LOG, Outcome, Settings, run_chaos, started_on_disk
from allot.client.chaos_check import check
from allot.client.logfile import LogFileError, read_log
from allot.services.runtime import code_version


async def bench_chaos(args: argparse.Namespace) -> int:
    if args.check is not None:
        return check_again(Path(args.check))
    for option, value in [
        ("--seconds", args.seconds),
        ("--kill-every", args.kill_every),
        ("--submit-every", args.submit_every),
        ("--settle", args.settle),
    ]:
        if not value > 0:  # NaN too
            print(f"allot: {option}={value:g}: give a number of seconds above 0", file=sys.stderr)
            return 2
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    settings = Settings(
        seconds=args.seconds,
        seed=args.seed,
        kill_every_s=args.kill_every,
        submit_every_s=args.submit_every,
        settle_s=args.settle,
    )
    if args.data_dir is not None:
        outcome = await run_chaos(Path(args.data_dir), settings)
    else:
        with tempfile.TemporaryDirectory(prefix="allot-chaos-") as tmp:
            outcome = await run_chaos(Path(tmp), settings)
            outcome.log_path = None  # gone with the directory
    figures = summary(outcome)
    if args.json:
        print(json.dumps(figures, indent=2, sort_keys=True))
    else:
        print(report(figures))
    return 0 if outcome.passed else 1


def check_again(data_dir: Path) -> int:
    """The invariants, checked again from a kept run's exported log and what its clients
    were told (``--data-dir`` of that run)."""
    try:
        acknowledged = msgspec.json.decode(
            (data_dir / ACKNOWLEDGED).read_bytes(), type=dict[str, str]
        )
        records = list(read_log(data_dir / LOG))
    except (OSError, msgspec.DecodeError, LogFileError) as error:
        print(f"allot: --check {data_dir}: {error}", file=sys.stderr)
        return 2
    verdict = check(records, acknowledged, code_version(), ran=started_on_disk(data_dir))
    print(f"{verdict.events} events, {verdict.acknowledged} acknowledged, lost {verdict.lost}, "
          f"duplicated {verdict.duplicated}, not ended {verdict.not_ended}, "
          f"nodes lost {verdict.nodes_lost}, "
          f"{verdict.plans_verified} plans verified; invariant violations: "
          f"{len(verdict.findings)}")  # fmt: skip
    for finding in verdict.findings:
        print(f"  {finding.invariant} {finding.job_id} at {finding.seq}: {finding.detail}")
    return 0 if verdict.passed else 1


def summary(outcome: Outcome) -> dict[str, object]:
    verdict = outcome.verdict
    return {
        "kills_survived": dict(sorted(outcome.kills.items())),
        "kills_total": sum(outcome.kills.values()),
        "not_back": outcome.not_back,
        "submissions": outcome.submissions,
        "acknowledged": verdict.acknowledged,
        "unacknowledged": outcome.unacknowledged,
        "refused": outcome.refused,
        "lost": verdict.lost,
        "duplicated": verdict.duplicated,
        "jobs": verdict.jobs,
        "jobs_not_ended": verdict.not_ended,
        "nodes_lost": verdict.nodes_lost,
        "ended": verdict.ended,
        "settled_in_s": None if outcome.settled_in_s is None else round(outcome.settled_in_s, 1),
        "events": verdict.events,
        "plans_verified": verdict.plans_verified,
        "starts_from_snapshot": outcome.from_snapshot,
        "violations": [msgspec.to_builtins(f) for f in verdict.findings],
        "log": str(outcome.log_path) if outcome.log_path is not None else None,
        "passed": outcome.passed,
    }


def report(figures: dict[str, object]) -> str:
    kills = figures["kills_survived"]
    assert isinstance(kills, dict)
    per_kind = ", ".join(f"{kind} {n}" for kind, n in kills.items()) or "none"
    violations = figures["violations"]
    assert isinstance(violations, list)
    lines = [
        f"kills survived: {figures['kills_total']} ({per_kind}); "
        f"not back: {', '.join(figures['not_back']) or 'none'}",  # type: ignore[arg-type]
        f"submissions: {figures['submissions']}, acknowledged {figures['acknowledged']}, "
        f"unacknowledged {figures['unacknowledged']}, lost {figures['lost']}, "
        f"duplicated {figures['duplicated']}",
        f"jobs: {figures['jobs']}, not ended {figures['jobs_not_ended']}, "
        f"ended {figures['ended']} (settled in {figures['settled_in_s']} s); "
        f"nodes declared lost: {figures['nodes_lost']}",
        f"log: {figures['events']} events, {figures['plans_verified']} plans verified, "
        f"{figures['starts_from_snapshot']} service starts from a snapshot; "
        f"kept at {figures['log'] or '(not kept: give --data-dir)'}",
        f"invariant violations: {len(violations)}",
        *(f"  {v['invariant']} {v['job_id']} at {v['seq']}: {v['detail']}" for v in violations),
    ]
    return "\n".join(lines)
