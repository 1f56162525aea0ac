import argparse
from typing import get_args

from allot.core import DEFAULT_POLICY, Policy
from allot.services.planner.app import SNAPSHOT_EVERY, SNAPSHOT_INTERVAL_S, serve
from allot.services.runtime import run_service

parser = argparse.ArgumentParser(prog="allot-planner")
parser.add_argument("--half-life", default="7d", help="fair-share usage half-life (default 7d)")
parser.add_argument(
    "--usage-window", help="count usage in this sliding window instead of decaying it, e.g. 7d"
)
parser.add_argument("--aging-step", default="1h", help="waiting this long lifts a job one rank")
parser.add_argument(
    "--aging-max",
    type=int,
    default=DEFAULT_POLICY.aging_max_ranks,
    help=f"the most ranks aging lifts a job (default {DEFAULT_POLICY.aging_max_ranks})",
)
parser.add_argument(
    "--no-backfill", action="store_true", help="no reservation for the head job, no backfill"
)
parser.add_argument(
    "--order",
    choices=get_args(Policy.__annotations__["order"]),
    default=DEFAULT_POLICY.order,
    help=f"how the queue is ordered (default {DEFAULT_POLICY.order})",
)
parser.add_argument(
    "--tick", type=float, default=5.0, help="seconds between plans while the log is quiet"
)
parser.add_argument(
    "--snapshot-every",
    type=int,
    default=SNAPSHOT_EVERY,
    help=f"events folded between snapshots of the state (default {SNAPSHOT_EVERY}; 0: none)",
)
parser.add_argument(
    "--snapshot-interval",
    type=float,
    default=SNAPSHOT_INTERVAL_S,
    help=f"seconds at least between snapshots (default {SNAPSHOT_INTERVAL_S:g})",
)
run_service("planner", parser, serve)
