"""Simulated GPUs behind pynvml's function surface: what a node without NVIDIA GPUs runs on
(R17), and what tests drive the NVML inventory and health watch through.

``SimulatedNvml`` answers the calls ``allot.services.node.nvml.Gpus`` makes, with pynvml's
own errors and constants, from ``SimGpu`` records a test (or ``simulated_host``) sets up:
MIG instances, NVLink links, features a GPU lacks, a lost GPU, ECC counters, pending
retirements and remaps, clock slowdowns. XID events are queued by ``inject_xid`` and
delivered by the blocking ``nvmlEventSetWait_v2``, as the real one delivers them.

A simulated node can be given faults while it runs: ``FaultFile`` reads JSON lines such as
``{"gpu": 3, "xid": 79}`` appended to a file (``--simulated-faults``).
"""

import dataclasses
import queue
import uuid as uuids
from pathlib import Path
from types import SimpleNamespace
from typing import Annotated, Any, Literal

import msgspec
import pynvml

NO_INSTANCE = 0xFFFFFFFF  # what NVML says of an event's GPU instance off MIG


def _error(code: int) -> pynvml.NVMLError:
    return pynvml.NVMLError(code)  # pynvml picks the subclass, e.g. NVMLError_NotSupported


@dataclasses.dataclass
class SimMig:
    """One MIG instance of a simulated GPU."""

    name: str  # e.g. "NVIDIA A100-SXM4-80GB MIG 1g.10gb"
    memory_mib: int
    uuid: str
    gpu_instance_id: int
    used_mib: int = 0
    parent: "SimGpu | None" = None


@dataclasses.dataclass
class SimGpu:
    name: str
    memory_mib: int
    uuid: str
    bus_id: str
    links: list[str] = dataclasses.field(default_factory=list)  # far ends of active NVLinks
    mig: list[SimMig] | None = None  # None: MIG off
    unsupported: set[str] = dataclasses.field(default_factory=set)  # NVML functions it lacks
    lost: bool = False
    ecc_uncorrected: int = 0
    retired_pages_pending: bool = False
    row_remap_pending: bool = False
    row_remap_failed: bool = False
    clocks_event_reasons: int = 0
    utilization: int = 0
    memory_used_mib: int = 0
    temperature_c: int = 35
    power_mw: int = 70_000


class SimulatedNvml:
    """pynvml's functions, answered by ``gpus``."""

    def __init__(self, gpus: list[SimGpu], driver: str = "simulated"):
        self.gpus = gpus
        self.driver = driver
        self.initialised = False
        self._events: queue.Queue[SimpleNamespace] = queue.Queue()
        self._registered: set[str] = set()  # UUIDs of GPUs whose events are watched
        for gpu in gpus:
            for instance in gpu.mig or []:
                instance.parent = gpu

    # --- test hooks ---

    def inject_xid(self, index: int, xid: int, gpu_instance_id: int = NO_INSTANCE) -> None:
        gpu = self.gpus[index]
        if gpu.uuid in self._registered:
            self._events.put(
                SimpleNamespace(
                    device=gpu,
                    eventType=pynvml.nvmlEventTypeXidCriticalError,
                    eventData=xid,
                    gpuInstanceId=gpu_instance_id,
                )
            )

    # --- pynvml's surface ---

    def _gpu(self, handle: Any, function: str) -> SimGpu:
        gpu: SimGpu = handle.parent if isinstance(handle, SimMig) and handle.parent else handle
        if not self.initialised:
            raise _error(pynvml.NVML_ERROR_UNINITIALIZED)
        if gpu.lost:
            raise _error(pynvml.NVML_ERROR_GPU_IS_LOST)
        if function in gpu.unsupported:
            raise _error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return gpu

    def nvmlInit(self) -> None:
        self.initialised = True

    def nvmlShutdown(self) -> None:
        self.initialised = False

    def nvmlSystemGetDriverVersion(self) -> str:
        return self.driver

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> SimGpu:
        if not 0 <= index < len(self.gpus):
            raise _error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        self._gpu(self.gpus[index], "nvmlDeviceGetHandleByIndex")
        return self.gpus[index]

    def nvmlDeviceGetUUID(self, handle: Any) -> str:
        self._gpu(handle, "nvmlDeviceGetUUID")
        return handle.uuid  # type: ignore[no-any-return]

    def nvmlDeviceGetName(self, handle: Any) -> str:
        self._gpu(handle, "nvmlDeviceGetName")
        return handle.name  # type: ignore[no-any-return]

    def nvmlDeviceGetMemoryInfo(self, handle: Any) -> SimpleNamespace:
        gpu = self._gpu(handle, "nvmlDeviceGetMemoryInfo")
        total = handle.memory_mib << 20
        used = (handle.used_mib if isinstance(handle, SimMig) else gpu.memory_used_mib) << 20
        return SimpleNamespace(total=total, used=used, free=total - used)

    def nvmlDeviceGetPciInfo(self, handle: Any) -> SimpleNamespace:
        return SimpleNamespace(busId=self._gpu(handle, "nvmlDeviceGetPciInfo").bus_id.encode())

    def nvmlDeviceGetMigMode(self, handle: Any) -> list[int]:
        mode = int(self._gpu(handle, "nvmlDeviceGetMigMode").mig is not None)
        return [mode, mode]

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: Any) -> int:
        return 7 if self._gpu(handle, "nvmlDeviceGetMaxMigDeviceCount").mig is not None else 0

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: Any, position: int) -> SimMig:
        instances = self._gpu(handle, "nvmlDeviceGetMigDeviceHandleByIndex").mig or []
        if position >= len(instances):
            raise _error(pynvml.NVML_ERROR_NOT_FOUND)
        return instances[position]

    def nvmlDeviceGetGpuInstanceId(self, handle: Any) -> int:
        self._gpu(handle, "nvmlDeviceGetGpuInstanceId")
        if not isinstance(handle, SimMig):
            raise _error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return handle.gpu_instance_id

    def nvmlDeviceGetNvLinkState(self, handle: Any, link: int) -> int:
        gpu = self._gpu(handle, "nvmlDeviceGetNvLinkState")
        if link >= len(gpu.links):
            raise _error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return pynvml.NVML_FEATURE_ENABLED  # type: ignore[no-any-return]

    def nvmlDeviceGetNvLinkRemotePciInfo(self, handle: Any, link: int) -> SimpleNamespace:
        gpu = self._gpu(handle, "nvmlDeviceGetNvLinkRemotePciInfo")
        return SimpleNamespace(busId=gpu.links[link].encode())

    def nvmlDeviceGetTotalEccErrors(self, handle: Any, kind: int, counter: int) -> int:
        gpu = self._gpu(handle, "nvmlDeviceGetTotalEccErrors")
        return gpu.ecc_uncorrected if kind == pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED else 0

    def nvmlDeviceGetRetiredPagesPendingStatus(self, handle: Any) -> int:
        gpu = self._gpu(handle, "nvmlDeviceGetRetiredPagesPendingStatus")
        return int(gpu.retired_pages_pending)

    def nvmlDeviceGetRemappedRows(self, handle: Any) -> tuple[int, int, int, int]:
        gpu = self._gpu(handle, "nvmlDeviceGetRemappedRows")
        return (0, 0, int(gpu.row_remap_pending), int(gpu.row_remap_failed))

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: Any) -> int:
        return self._gpu(handle, "nvmlDeviceGetCurrentClocksEventReasons").clocks_event_reasons

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: Any) -> int:
        """The same, by its name before driver 535."""
        gpu = self._gpu(handle, "nvmlDeviceGetCurrentClocksThrottleReasons")
        return gpu.clocks_event_reasons

    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> SimpleNamespace:
        gpu = self._gpu(handle, "nvmlDeviceGetUtilizationRates")
        if isinstance(handle, SimMig):  # as on real MIG instances
            raise _error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return SimpleNamespace(gpu=gpu.utilization, memory=0)

    def nvmlDeviceGetTemperature(self, handle: Any, sensor: int) -> int:
        return self._gpu(handle, "nvmlDeviceGetTemperature").temperature_c

    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int:
        return self._gpu(handle, "nvmlDeviceGetPowerUsage").power_mw

    def nvmlEventSetCreate(self) -> object:
        return object()

    def nvmlDeviceRegisterEvents(self, handle: Any, kinds: int, events: object) -> None:
        self._registered.add(self._gpu(handle, "nvmlDeviceRegisterEvents").uuid)

    def nvmlEventSetWait_v2(self, events: object, timeout_ms: int) -> SimpleNamespace:
        try:
            return self._events.get(timeout=timeout_ms / 1000)
        except queue.Empty:
            raise _error(pynvml.NVML_ERROR_TIMEOUT) from None

    def nvmlEventSetFree(self, events: object) -> None:
        self._registered.clear()


def simulated_host(
    node_id: str, count: int, model: str, memory_mib: int, islands: list[list[int]]
) -> SimulatedNvml:
    """``count`` GPUs, each island of several joined through an NVSwitch of its own (in a
    PCI domain of the switches'). UUIDs follow from the node id, so a restarted node has
    the same GPUs."""
    switch_of = {g: n for n, island in enumerate(islands) if len(island) > 1 for g in island}
    gpus = [
        SimGpu(
            name=model,
            memory_mib=memory_mib,
            uuid=f"GPU-{uuids.uuid5(uuids.NAMESPACE_URL, f'allot-sim:{node_id}/{index}')}",
            bus_id=f"00000000:{0x10 + index // 32:02x}:{index % 32:02x}.0",
            links=[f"00000001:{switch_of[index]:04x}:00.0"] if index in switch_of else [],
        )
        for index in range(count)
    ]
    return SimulatedNvml(gpus)


class SimFault(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One line of a simulated node's fault file."""

    gpu: int
    xid: Annotated[int, msgspec.Meta(ge=0, lt=1 << 32)] | None = None
    ecc_uncorrected: int | None = None
    lost: bool | None = None
    slowdown: Literal["thermal", "power", "none"] | None = None


class FaultFile:
    """Faults appended to a file, applied to simulated GPUs as they appear."""

    def __init__(self, path: Path, nvml: SimulatedNvml):
        self.path = path
        self.nvml = nvml
        self._read = 0  # bytes of the file already applied

    def apply_new(self) -> list[str]:
        """Apply the lines added since the last look; what was wrong with any."""
        try:
            with open(self.path, "rb") as file:
                if self._read > file.seek(0, 2):  # written anew, shorter: from its start
                    self._read = 0
                file.seek(self._read)
                data = file.read()
        except OSError as error:
            return [] if isinstance(error, FileNotFoundError) else [f"{self.path}: {error}"]
        complete = data[: data.rfind(b"\n") + 1]  # a line still being written waits
        self._read += len(complete)
        problems = []
        for line in complete.splitlines():
            if line.strip():
                try:
                    self._apply(msgspec.json.decode(line, type=SimFault))
                except (msgspec.ValidationError, msgspec.DecodeError, IndexError) as error:
                    problems.append(f"{self.path}: {line[:200]!r}: {error}")
        return problems

    def _apply(self, fault: SimFault) -> None:
        if not 0 <= fault.gpu < len(self.nvml.gpus):
            raise IndexError(f"gpu={fault.gpu}: the GPUs are 0..{len(self.nvml.gpus) - 1}")
        gpu = self.nvml.gpus[fault.gpu]
        if fault.xid is not None:
            self.nvml.inject_xid(fault.gpu, fault.xid)
        if fault.ecc_uncorrected is not None:
            gpu.ecc_uncorrected = fault.ecc_uncorrected
        if fault.lost is not None:
            gpu.lost = fault.lost
        if fault.slowdown is not None:
            gpu.clocks_event_reasons = {
                "thermal": pynvml.nvmlClocksEventReasonHwThermalSlowdown,
                "power": pynvml.nvmlClocksEventReasonHwPowerBrakeSlowdown,
                "none": 0,
            }[fault.slowdown]
