"""The node agent's eye on its GPUs while it runs: the faults each heartbeat carries, XID
events remembered until the log has them, and samples of each GPU's load.

A heartbeat carries every fault the GPUs show now, so a heartbeat lost, or a telemetry
service that restarts, costs nothing: the next one says it again. An XID is an event, not
a condition, so it is kept and sent again with every heartbeat until the log records the
GPU as broken (``acknowledge``); the log, not this process, remembers it after that.
"""

import asyncio
import logging

from allot.core.gpuhealth import STICKY, counts, host_suspect
from allot.core.model import NodeRecord
from allot.proto.telemetry import GpuFault, GpuSample
from allot.services.node.nvml import Gpus, Inventory
from allot.services.node.simnvml import FaultFile

log = logging.getLogger("allot.node")

EVENT_WAIT_MS = 1000  # how long one blocking wait for an XID lasts


class GpuWatch:
    def __init__(self, gpus: Gpus, simulated: bool, fault_file: FaultFile | None = None):
        self.gpus = gpus
        self.simulated = simulated
        self.fault_file = fault_file
        self._unacknowledged: dict[int | None, GpuFault] = {}  # device -> the XID it threw

    async def open(self) -> Inventory:
        """Start NVML and read the inventory, in a thread: a sick GPU can take seconds."""
        await asyncio.to_thread(self.gpus.open)
        inventory = await asyncio.to_thread(self.gpus.inventory)
        for problem in inventory.problems:
            log.warning("GPU inventory: %s", problem)
        await asyncio.to_thread(self.gpus.watch_events)
        return inventory

    async def faults(self) -> list[GpuFault]:
        if self.fault_file is not None:
            for problem in self.fault_file.apply_new():
                log.warning("simulated fault not applied: %s", problem)
        conditions = await asyncio.to_thread(self.gpus.faults)
        return [*conditions, *self._unacknowledged.values()]

    async def watch_xids(self) -> None:
        """Wait for XID events, in a thread, for as long as the agent runs."""
        while True:
            try:
                found = await asyncio.to_thread(self.gpus.wait_event, EVENT_WAIT_MS)
            except Exception as error:  # the event set broke: no XIDs, but the rest goes on
                log.error("waiting for GPU events failed (%s); trying again in 10s", error)
                await asyncio.sleep(10)
                continue
            for fault in found:
                log.warning("GPU %s: %s", fault.gpu, fault.detail)
                known = self._unacknowledged.get(fault.gpu)
                if counts(fault) and (known is None or host_suspect(fault) > host_suspect(known)):
                    self._unacknowledged[fault.gpu] = fault

    def acknowledge(self, node: NodeRecord | None) -> None:
        """Forget the XIDs the log now holds: their GPU recorded as broken and, where the
        host is suspect, the node draining."""
        if node is None:
            return
        for device, fault in list(self._unacknowledged.items()):
            recorded = node.fault if device is None else node.gpu_faults.get(device)
            held = recorded is not None and recorded.kind in STICKY
            if held and (node.draining or not host_suspect(fault)):
                del self._unacknowledged[device]

    async def samples(self) -> list[GpuSample]:
        return await asyncio.to_thread(self.gpus.samples)

    def close(self) -> None:
        self.gpus.close()
