"""Check a GPU host end to end: the real NVML inventory, health and samples, then one
1-GPU job run through the real node agent, which must see exactly the GPU it was given.
``deploy/gpu-check.sh`` runs this; where there is no NVIDIA GPU it says so and skips.

    python -m allot.client.gpucheck [--work-dir DIR]
"""

import argparse
import asyncio
import socket
import sys
import tempfile
from pathlib import Path

import pynvml

from allot.client.render import table
from allot.client.stack import NodeShape, Stack
from allot.core import JobStatus
from allot.proto.events import JobSpec, JobStarted
from allot.services.node.nvml import Gpus, Inventory, Unavailable

SKIPPED = 0  # nothing to check is not a failure: the script says so plainly
# What the job reports: the devices it was shown, and how many CUDA itself can see there.
JOB = r"""
import ctypes, os
print("CUDA_VISIBLE_DEVICES=" + os.environ["CUDA_VISIBLE_DEVICES"])
print("ALLOT_GPU_UUIDS=" + os.environ["ALLOT_GPU_UUIDS"])
try:
    cuda = ctypes.CDLL("libcuda.so.1")
except OSError as error:
    print(f"CUDA devices: unknown, no CUDA driver library ({error})")
else:
    count = ctypes.c_int()
    status = cuda.cuInit(0) or cuda.cuDeviceGetCount(ctypes.byref(count))
    print(f"CUDA devices: {count.value}" if status == 0 else f"CUDA error {status}")
"""


def inventory() -> Inventory | None:
    """Print what NVML says of this host; None where there is no NVML to ask."""
    gpus = Gpus(pynvml)
    try:
        gpus.open()
    except Unavailable as error:
        print(f"gpu-check skipped: {error}. There is no NVIDIA GPU to check on this host.")
        return None
    try:
        found = gpus.inventory()
        print(f"NVML driver {found.driver}: {len(found.gpus)} devices")
        rows = [
            [g.index, g.model, g.memory_mib, g.uuid, g.pci_bus_id, g.parent] for g in found.gpus
        ]
        print(table(["DEVICE", "MODEL", "MEMORY MIB", "UUID", "PCI BUS", "MIG OF"], rows))
        print(f"NVLink islands: {found.nvlink_islands}")
        for problem in found.problems:
            print(f"problem: {problem}")
        faults = gpus.faults()
        print("faults now: " + (", ".join(f"{f.gpu}: {f.detail}" for f in faults) or "none"))
        for sample in gpus.samples():
            print(f"sample: {sample}")
        return found
    finally:
        gpus.close()


async def run_one_job(work: Path, found: Inventory) -> bool:
    """One 1-GPU job through a stack whose only node is this host's real agent."""
    node_id = "".join(c if c.isalnum() or c in "-_" else "-" for c in socket.gethostname())[:64]
    node = NodeShape(node_id=node_id, gpus=len(found.gpus), simulated=False)
    async with Stack(work, [node], restart=False) as stack, await stack.client() as client:
        spec = JobSpec(account="gpu-check", gpus=1, command=[sys.executable, "-c", JOB])
        reply = await client.submit(spec)
        assert reply.job_id is not None
        job = await client.wait(reply.job_id, timeout=120)
        started = [
            r.event
            for r in await client.events.read()
            if isinstance(r.event, JobStarted) and r.event.job_id == reply.job_id
        ]
        output = Path(job.output_path).read_text() if job.output_path else ""
    print(f"job {job.job_id}: {job.status} (exit code {job.exit_code}) on {node_id}")
    uuids = [u for e in started if isinstance(e, JobStarted) for u in e.gpu_uuids]
    print(f"JobStarted recorded GPUs {uuids}")
    print(output, end="")
    sees_one = "CUDA devices: 1\n" in output or "CUDA devices: unknown" in output
    ok = (
        job.status == JobStatus.SUCCEEDED
        and len(uuids) == 1
        and f"CUDA_VISIBLE_DEVICES={uuids[0]}\n" in output
        and sees_one
    )
    print("gpu-check " + ("passed" if ok else "FAILED"))
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(prog="gpu-check", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--work-dir", type=Path, help="where the check's stack lives (default: a temporary folder)"
    )
    args = parser.parse_args()
    found = inventory()
    if found is None:
        return SKIPPED
    if not found.gpus:
        print("gpu-check FAILED: NVML answers, but offers no device to run a job on")
        return 1
    with tempfile.TemporaryDirectory(prefix="allot-gpu-check-") as temporary:
        work = args.work_dir or Path(temporary)
        return 0 if asyncio.run(run_one_job(work, found)) else 1


if __name__ == "__main__":
    sys.exit(main())
