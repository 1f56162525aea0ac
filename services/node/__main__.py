import argparse
from pathlib import Path

from allot.services.node.app import serve
from allot.services.runtime import run_service

parser = argparse.ArgumentParser(prog="allot-node")
parser.add_argument("--node-id", required=True)
parser.add_argument("--gpus", type=int, default=8, help="simulated GPUs on this node")
parser.add_argument("--gpu-model", default="SIM-H100")
parser.add_argument("--gpu-memory-mib", type=int, default=81559)
parser.add_argument("--cpus", type=int, default=64, help="simulated CPUs on this node")
parser.add_argument("--memory-mib", type=int, default=1_048_576, help="simulated memory")
parser.add_argument(
    "--label", action="append", default=[], metavar="KEY=VALUE", help="e.g. rack=r1 (repeatable)"
)
parser.add_argument("--nvlink-islands", help="GPUs sharing NVLink, e.g. 0-3,4-7 (default: all)")
parser.add_argument("--work-dir", type=Path, required=True, help="job directories live here")
parser.add_argument(
    "--checkpoint-root",
    type=Path,
    help="one checkpoint directory per job, on storage all nodes share (default WORK/checkpoints)",
)
parser.add_argument("--heartbeat", type=float, default=1.0, help="seconds between heartbeats")
parser.add_argument(
    "--stop-grace", type=float, default=10.0, help="SIGTERM→SIGKILL seconds on cancel"
)
run_service("node", parser, serve)
