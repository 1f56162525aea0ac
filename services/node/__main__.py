import argparse
from pathlib import Path

from allot.services.node.app import serve
from allot.services.runtime import run_service, seconds

parser = argparse.ArgumentParser(
    prog="allot-node",
    description="The node agent: runs the jobs placed on this host. Without --gpus it finds "
    "this host's NVIDIA GPUs through NVML; with it, it simulates that many.",
)
parser.add_argument(
    "--node-id", help="this node's id (default: its identity's node, else the host's name)"
)
parser.add_argument(
    "--gpus", type=int, help="simulate this many GPUs (default: this host's, through NVML)"
)
parser.add_argument("--gpu-model", default="SIM-H100", help="a simulated GPU's model")
parser.add_argument("--gpu-memory-mib", type=int, default=81559, help="a simulated GPU's memory")
parser.add_argument(
    "--nvlink-islands", help="simulated GPUs sharing NVLink, e.g. 0-3,4-7 (default: all)"
)
parser.add_argument(
    "--simulated-faults",
    type=Path,
    metavar="FILE",
    help="apply faults appended to FILE to the simulated GPUs, one JSON line each, e.g. "
    '{"gpu": 3, "xid": 79}, {"gpu": 1, "ecc_uncorrected": 2}, {"gpu": 0, "lost": true}, '
    '{"gpu": 2, "slowdown": "thermal"}',
)
parser.add_argument("--cpus", type=int, help="CPUs offered (default: this host's; simulated: 64)")
parser.add_argument(
    "--memory-mib", type=int, help="memory offered (default: this host's; simulated: 1 TiB)"
)
parser.add_argument(
    "--label", action="append", default=[], metavar="KEY=VALUE", help="e.g. rack=r1 (repeatable)"
)
parser.add_argument("--work-dir", type=Path, required=True, help="job directories live here")
parser.add_argument(
    "--checkpoint-root",
    type=Path,
    help="one checkpoint directory per job, on storage all nodes share (default WORK/checkpoints)",
)
parser.add_argument(
    "--heartbeat", type=seconds(0.01), default=1.0, help="seconds between heartbeats"
)
parser.add_argument(
    "--sample-interval",
    type=seconds(0.01),
    default=10.0,
    help="seconds between samples of GPU load",
)
parser.add_argument(
    "--stop-grace", type=seconds(0, 3600), default=10.0, help="SIGTERM→SIGKILL seconds on cancel"
)
if __name__ == "__main__":
    run_service("node", parser, serve)
