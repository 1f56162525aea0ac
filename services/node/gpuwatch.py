"""The node agent's eye on its GPUs while it runs: the faults each heartbeat carries, XID
events remembered until the log has them, and samples of each GPU's load.

NVML is read by two threads of this object's own, never by the agent's event loop: one
reads the conditions (and, less often, the samples) every ``poll_s``; one waits for XID
events. A heartbeat takes what they last read, so a GPU whose queries hang (as one that
fell off the bus may) never holds a heartbeat back; where NVML has not answered for
``stale_s``, the heartbeat says so, as a fault of the host.

A heartbeat carries every fault the GPUs show now, so a heartbeat lost, or a telemetry
service that restarts, costs nothing: the next one says it again. An XID is an event, not
a condition, so it is kept and sent with every heartbeat until the log records the GPU as
broken (``acknowledge``); the log, not this process, remembers it after that.
"""

import asyncio
import logging
import threading
import time
from collections.abc import Callable

from allot.core.gpuhealth import STICKY, counts, host_suspect
from allot.core.model import NodeRecord
from allot.proto.telemetry import GpuFault, GpuSample
from allot.services.node.nvml import Gpus, Inventory, Unavailable, fault
from allot.services.node.simnvml import FaultFile

log = logging.getLogger("allot.node")

EVENT_WAIT_MS = 1000  # how long one blocking wait for an XID lasts
STALE_S = 30.0  # NVML silent this long is a fault of the host
FIRST_READING_S = 5.0  # the longest the agent waits for it before it registers


class GpuWatch:
    def __init__(
        self,
        gpus: Gpus,
        simulated: bool,
        fault_file: FaultFile | None = None,
        poll_s: float = 1.0,
        sample_s: float = 10.0,
        stale_s: float = STALE_S,
    ):
        self.gpus = gpus
        self.simulated = simulated
        self.fault_file = fault_file
        # A slow poll is not silence: silence is three looks missed, and never under 30 s.
        self.poll_s, self.sample_s = poll_s, sample_s
        self.stale_s = max(stale_s, 3 * poll_s)
        self.read_at: float | None = None  # monotonic time of the last full reading
        self._conditions: list[GpuFault] = []
        self._samples: list[GpuSample] = []
        self._unacknowledged: dict[int | None, GpuFault] = {}  # device -> the XID it threw
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._first_reading = threading.Event()
        self._threads: list[threading.Thread] = []
        self._opened_at = time.monotonic()

    async def open(self) -> Inventory:
        """Start NVML and read the inventory (in a thread: a sick GPU can take seconds),
        register for events, then start watching, and wait a moment for a first reading:
        a first heartbeat with no faults would say that all is well."""
        try:
            await asyncio.to_thread(self.gpus.open)
            inventory = await asyncio.to_thread(self.gpus.inventory)
        except Unavailable:
            raise
        except Exception as error:  # NVML loaded, but cannot say what the host has
            await asyncio.to_thread(self.close)
            raise Unavailable(f"NVML cannot list this host's GPUs: {error}") from None
        for problem in inventory.problems:
            log.warning("GPU inventory: %s", problem)
        try:
            # Events first: an XID a fault file (or the driver) gives at once is not lost.
            watched = await asyncio.to_thread(self.gpus.watch_events)
            self._opened_at = time.monotonic()
            self._start(self._poll, "allot-gpu-poll")
            if watched:
                self._start(self._wait_for_xids, "allot-gpu-events")
            else:
                log.warning("NVML gives no event set on this host: XIDs are not watched")
            await asyncio.to_thread(self._first_reading.wait, FIRST_READING_S)
        except BaseException:
            await asyncio.to_thread(self.close)
            raise
        return inventory

    def _start(self, target: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def faults(self) -> list[GpuFault]:
        """What the next heartbeat says: the conditions last read, the XIDs the log does
        not have yet, and whether NVML has gone silent."""
        now = time.monotonic()
        with self._lock:
            found = [*self._conditions, *self._unacknowledged.values()]
        silent = now - (self.read_at if self.read_at is not None else self._opened_at)
        if silent >= self.stale_s:
            found.append(fault(None, "unanswered", f"NVML has not answered for {silent:.0f}s"))
        return found

    def samples(self) -> list[GpuSample]:
        """The last samples, none where NVML has gone silent: old ones are not news."""
        if self.read_at is None or time.monotonic() - self.read_at >= self.stale_s:
            return []
        with self._lock:
            return list(self._samples)

    def acknowledge(self, node: NodeRecord | None) -> None:
        """Forget the XIDs the log now holds: their GPU recorded as broken and, where the
        host is suspect, the node draining."""
        if node is None:
            return
        with self._lock:
            for device, xid in list(self._unacknowledged.items()):
                recorded = node.fault if device is None else node.gpu_faults.get(device)
                held = recorded is not None and recorded.kind in STICKY
                if held and (node.draining or not host_suspect(xid)):
                    del self._unacknowledged[device]

    def close(self) -> None:
        """Stop both threads, then shut NVML, never while a thread is inside it."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=2 * EVENT_WAIT_MS / 1000 + self.poll_s)
        if any(thread.is_alive() for thread in self._threads):
            log.warning("an NVML call still hangs: NVML is left to the process's exit")
            return
        self.gpus.close()

    # --- the threads ---

    def _poll(self) -> None:
        sampled_at = float("-inf")
        while not self._stop.is_set():
            try:
                if self.fault_file is not None:
                    for problem in self.fault_file.apply_new():
                        log.warning("simulated fault not applied: %s", problem)
                conditions = self.gpus.faults()
                samples = None
                if time.monotonic() - sampled_at >= self.sample_s:
                    samples, sampled_at = self.gpus.samples(), time.monotonic()
            except Exception:  # the next look tries again; silence shows in the heartbeat
                log.exception("reading the GPUs failed")
            else:
                with self._lock:
                    self._conditions = conditions
                    if samples is not None:
                        self._samples = samples
                self.read_at = time.monotonic()
                self._first_reading.set()
            self._stop.wait(self.poll_s)

    def _wait_for_xids(self) -> None:
        while not self._stop.is_set():
            try:
                found = self.gpus.wait_event(EVENT_WAIT_MS)
            except Exception as error:  # the event set broke: no XIDs, the rest goes on
                log.error("waiting for GPU events failed (%s); trying again in 10s", error)
                self._stop.wait(10)
                continue
            try:
                self._note(found)
            except Exception:  # a bug here must not end the watch for good
                log.exception("noting GPU events failed")

    def _note(self, found: list[GpuFault]) -> None:
        for xid in found:
            log.warning("GPU %s: %s", "of the host" if xid.gpu is None else xid.gpu, xid.detail)
            if not counts(xid):
                continue
            with self._lock:
                known = self._unacknowledged.get(xid.gpu)
                if known is None or host_suspect(xid) > host_suspect(known):
                    self._unacknowledged[xid.gpu] = xid
