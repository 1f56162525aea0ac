"""``allot sim``: run a trace through the planner on a virtual clock and report metrics."""

import argparse
import json
import sys
from pathlib import Path

from allot.core import DEFAULT_POLICY, Policy
from allot.sim.simulator import Settings, simulate
from allot.sim.trace import Fill, TraceError, filled, load

# The policies this simulator runs today. The baselines (fifo, priority, kueue, slurm)
# are to be built as planner policies, so that they run through the same code.
POLICIES: dict[str, Policy] = {"allot": DEFAULT_POLICY}


def parse_cluster(text: str) -> Settings:
    count, sep, gpus = text.partition("x")
    if not (sep and count.isdigit() and gpus.isdigit() and int(count) > 0 and int(gpus) > 0):
        raise SystemExit(f"allot: --cluster {text!r}: expected NODESxGPUS, e.g. 24x8")
    return Settings(nodes=int(count), gpus_per_node=int(gpus))


def cmd_sim(args: argparse.Namespace) -> int:
    if args.policy not in POLICIES:
        print(
            f"allot: --policy {args.policy!r}: available: {', '.join(sorted(POLICIES))}",
            file=sys.stderr,
        )
        return 2
    settings = parse_cluster(args.cluster)
    fill = Fill(seed=args.seed)
    try:
        jobs = filled(load(Path(args.trace), args.format), fill)
    except TraceError as error:
        print(f"allot: {error}", file=sys.stderr)
        return 2
    if args.limit:
        jobs = jobs[: args.limit]
    print(f"{len(jobs)} jobs; {fill.describe()}", file=sys.stderr)
    result = simulate(jobs, settings, POLICIES[args.policy], args.policy)
    result["fill"] = fill.describe()
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    for key, value in result.items():
        if key not in ("per_account", "fill"):
            print(f"{key:32} {value:.4g}" if isinstance(value, float) else f"{key:32} {value}")
    return 0
