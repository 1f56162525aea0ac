"""A host's GPUs as NVML sees them: the inventory a node registers, the faults it reports
in its heartbeats, and samples of each GPU's load (docs/adr/0017).

``Gpus`` reads any object with pynvml's function surface: the real ``pynvml`` module
(``nvidia-ml-py``) on a GPU host, ``allot.services.node.simnvml.SimulatedNvml`` everywhere
else. Errors and constants are always pynvml's own, so both raise the same exceptions.

Every NVML call goes through ``_ask``: a feature a GPU does not have (``NotSupported``, no
permission, an old driver without the function) is an unknown, never a guess of zero; a
GPU that is lost is a fault; any other failure of one GPU is reported as that GPU
answering nothing, and the others go on.

Devices are the node's slots work is placed on: a GPU without MIG keeps NVML's index; the
MIG instances of a GPU in MIG mode are numbered after the last GPU (the GPU itself is not
offered then). NVLink islands are worked out from the links' far ends: GPUs linked to each
other, or to the same NVSwitch, share an island.
"""

import contextlib
import ctypes
import logging
import re
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec
import pynvml

from allot.core.gpuhealth import host_suspect
from allot.proto.events import GpuFaultKind, GpuInfo
from allot.proto.telemetry import MAX_DETAIL, GpuFault, GpuSample

log = logging.getLogger("allot.node.nvml")

T = TypeVar("T")
MIB = 1 << 20
# NVML answers these when a GPU or its driver lacks a feature: nothing is known of it.
_UNKNOWN = (
    pynvml.NVMLError_NotSupported,
    pynvml.NVMLError_NoPermission,
    pynvml.NVMLError_FunctionNotFound,
    pynvml.NVMLError_NotFound,
    pynvml.NVMLError_InvalidArgument,
)
THERMAL = pynvml.nvmlClocksEventReasonHwSlowdown | pynvml.nvmlClocksEventReasonHwThermalSlowdown
POWER = pynvml.nvmlClocksEventReasonHwPowerBrakeSlowdown


class Unavailable(Exception):
    """No GPUs can be read on this host: NVML is missing, or the driver is not loaded."""


class GpuLost(Exception):
    pass


class Unanswered(Exception):
    pass


class Device(msgspec.Struct, kw_only=True):
    """One slot: a whole GPU or one MIG instance, and the GPU it is on."""

    slot: int
    gpu: int  # NVML's index of the physical GPU
    uuid: str
    handle: Any
    mig_instance: int | None = None  # a MIG instance's GPU instance id


class Inventory(msgspec.Struct, frozen=True, kw_only=True):
    gpus: list[GpuInfo]
    nvlink_islands: list[list[int]]
    problems: list[str]  # what could not be learnt, one line each
    driver: str = ""


def _ask(call: Callable[..., T], *args: Any) -> T | None:
    """One NVML call: its answer, or None where the GPU lacks the feature."""
    try:
        return call(*args)
    except _UNKNOWN:
        return None
    except pynvml.NVMLError_GpuIsLost as error:
        raise GpuLost(str(error)) from None
    except pynvml.NVMLError as error:
        raise Unanswered(str(error)) from None


def _text(value: str | bytes) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else value


def fault(gpu: int | None, kind: GpuFaultKind, detail: str, xid: int | None = None) -> GpuFault:
    """A fault as its receiver takes it: the detail cut to length, an XID within bounds."""
    if xid is not None and not 0 <= xid < 1 << 32:
        detail, xid = f"XID {xid} (out of range)", None
    return GpuFault(gpu=gpu, kind=kind, detail=detail[:MAX_DETAIL], xid=xid)


_BUS = re.compile(r"^([0-9a-f]+):([0-9a-f]+):([0-9a-f]+)\.([0-9a-f]+)$")


def _bus_key(bus_id: str) -> str:
    """A PCI device's address as one key however NVML wrote it (domain of 4 or 8 digits,
    either case); the function is left out: NVLink joins devices."""
    found = _BUS.match(bus_id.strip().lower())
    if found is None:
        return bus_id.strip().lower()
    domain, bus, device, _ = (int(part, 16) for part in found.groups())
    return f"{domain:x}:{bus:x}:{device:x}"


def _same_handle(a: Any, b: Any) -> bool:
    """Whether two NVML handles name one device, asking NVML nothing (a lost GPU answers
    nothing): the same object, or ctypes pointers to the same address."""
    if a is b:
        return True
    try:
        first, second = ctypes.cast(a, ctypes.c_void_p).value, ctypes.cast(b, ctypes.c_void_p).value
    except (TypeError, ctypes.ArgumentError):
        return False
    return first is not None and first == second


class Gpus:
    """The GPUs of this host through ``nvml``; ``open`` before anything else."""

    def __init__(self, nvml: Any = pynvml):
        self.nvml = nvml
        self.devices: list[Device] = []
        self._by_gpu: dict[int, list[Device]] = {}  # physical GPU -> its slots
        self._handles: dict[int, Any] = {}  # physical GPU -> handle, where it answered
        self._gpu_of: dict[str, int] = {}  # physical GPU's UUID -> its index
        self._unanswered: dict[int, str] = {}  # physical GPU -> what it said
        self._events: Any = None

    def open(self) -> None:
        try:
            self.nvml.nvmlInit()
        except pynvml.NVMLError as error:
            raise Unavailable(f"NVML cannot be used on this host: {error}") from None

    def close(self) -> None:
        if self._events is not None:
            with contextlib.suppress(pynvml.NVMLError):
                self.nvml.nvmlEventSetFree(self._events)
            self._events = None
        with contextlib.suppress(pynvml.NVMLError):
            self.nvml.nvmlShutdown()

    # --- inventory ---

    def inventory(self) -> Inventory:
        nvml = self.nvml
        gpus: list[GpuInfo] = []
        problems: list[str] = []
        count = nvml.nvmlDeviceGetCount()
        buses: dict[int, str] = {}
        mig_slot = count
        self.devices, self._by_gpu, self._handles, self._unanswered = [], {}, {}, {}
        self._gpu_of = {}
        for index in range(count):
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
                uuid, name, memory_mib = self._identity(handle)
                pci = _ask(nvml.nvmlDeviceGetPciInfo, handle)
                mig = _ask(nvml.nvmlDeviceGetMigMode, handle)
            except (pynvml.NVMLError, GpuLost, Unanswered) as error:
                self._unanswered[index] = str(error)
                problems.append(f"GPU {index} answers nothing: {error}")
                continue
            self._handles[index] = handle
            self._gpu_of[uuid] = index
            bus = _text(pci.busId).strip().lower() if pci is not None else ""
            buses[index] = bus
            if mig is not None and mig[0] == pynvml.NVML_DEVICE_MIG_ENABLE:
                instances = self._mig_instances(index, handle, bus, mig_slot, problems)
                gpus += instances
                mig_slot += len(instances)
                continue
            device = Device(slot=index, gpu=index, uuid=uuid, handle=handle)
            self._add(device)
            gpus.append(
                GpuInfo(index=index, model=name, memory_mib=memory_mib, uuid=uuid, pci_bus_id=bus)
            )
        gpus = self._one_model(gpus, problems)
        islands = self._islands(buses, {g.index for g in gpus if g.parent is None})
        driver = ""
        with contextlib.suppress(pynvml.NVMLError):
            driver = _text(nvml.nvmlSystemGetDriverVersion())
        return Inventory(gpus=gpus, nvlink_islands=islands, problems=problems, driver=driver)

    def _mig_instances(
        self, index: int, handle: Any, bus: str, first_slot: int, problems: list[str]
    ) -> list[GpuInfo]:
        nvml = self.nvml
        found: list[GpuInfo] = []
        for position in range(_ask(nvml.nvmlDeviceGetMaxMigDeviceCount, handle) or 0):
            try:
                mig = _ask(nvml.nvmlDeviceGetMigDeviceHandleByIndex, handle, position)
                if mig is None:
                    continue  # no instance in this position
                uuid, name, memory_mib = self._identity(mig)
                instance = _ask(nvml.nvmlDeviceGetGpuInstanceId, mig)
            except (GpuLost, Unanswered) as error:
                problems.append(f"GPU {index}: MIG instance {position} answers nothing: {error}")
                continue
            slot = first_slot + len(found)
            self._add(Device(slot=slot, gpu=index, uuid=uuid, handle=mig, mig_instance=instance))
            found.append(
                GpuInfo(
                    index=slot,
                    model=name,
                    memory_mib=memory_mib,
                    uuid=uuid,
                    pci_bus_id=bus,
                    parent=index,
                )
            )
        if not found:
            problems.append(f"GPU {index} is in MIG mode with no instances: nothing to offer")
        return found

    def _identity(self, handle: Any) -> tuple[str, str, int]:
        """A device's UUID, name and memory (MiB): without them it cannot be offered."""
        uuid = _text(_ask(self.nvml.nvmlDeviceGetUUID, handle) or "")
        name = _text(_ask(self.nvml.nvmlDeviceGetName, handle) or "")
        memory = _ask(self.nvml.nvmlDeviceGetMemoryInfo, handle)
        if not uuid or not name or memory is None:
            raise Unanswered("no UUID, name or memory size")
        return uuid, name, memory.total // MIB

    def _one_model(self, gpus: list[GpuInfo], problems: list[str]) -> list[GpuInfo]:
        """The devices of the model the host has most of (whole GPUs first where it is a
        tie): placement takes a node to hold one model, and a job that asks for a whole
        GPU must never get a MIG slice. The others are reported and not offered."""
        count: dict[tuple[bool, str], int] = {}
        for gpu in gpus:
            key = (gpu.parent is not None, gpu.model)
            count[key] = count.get(key, 0) + 1
        if len(count) < 2:
            return gpus
        kept = min(count, key=lambda key: (-count[key], key))
        left = [g for g in gpus if (g.parent is not None, g.model) != kept]
        names = sorted({g.model for g in left})
        problems.append(
            f"devices {[g.index for g in left]} ({', '.join(names)}) are not offered: a node "
            f"offers one model, here {kept[1]}; partition its GPUs alike"
        )
        offered = {g.index for g in gpus} - {g.index for g in left}
        self.devices = [d for d in self.devices if d.slot in offered]
        self._by_gpu = {}
        for device in self.devices:
            self._by_gpu.setdefault(device.gpu, []).append(device)
        return [g for g in gpus if g.index in offered]

    def _add(self, device: Device) -> None:
        self.devices.append(device)
        self._by_gpu.setdefault(device.gpu, []).append(device)

    def _islands(self, buses: dict[int, str], whole: set[int]) -> list[list[int]]:
        """Whole GPUs joined by NVLink, directly or through an NVSwitch, as islands."""
        parent: dict[str, str] = {}

        def key(index: int) -> str:  # a GPU whose address is unknown is joined to nothing
            return f"pci:{_bus_key(buses[index])}" if buses[index] else f"index:{index}"

        def root(key: str) -> str:
            while parent.setdefault(key, key) != key:
                key = parent[key]
            return key

        for index in sorted(whole):
            handle = self._handles[index]
            for link in range(pynvml.NVML_NVLINK_MAX_LINKS):
                try:
                    state = _ask(self.nvml.nvmlDeviceGetNvLinkState, handle, link)
                    if state != pynvml.NVML_FEATURE_ENABLED:
                        continue
                    remote = _ask(self.nvml.nvmlDeviceGetNvLinkRemotePciInfo, handle, link)
                except (GpuLost, Unanswered):
                    break
                if remote is not None:
                    parent[root(key(index))] = root(f"pci:{_bus_key(_text(remote.busId))}")
        groups: dict[str, list[int]] = {}
        for index in sorted(whole):
            groups.setdefault(root(key(index)), []).append(index)
        return sorted(groups.values())

    # --- health ---

    def faults(self) -> list[GpuFault]:
        """The faults the GPUs show now: conditions read afresh, not remembered events."""
        found: list[GpuFault] = []
        for index, error in sorted(self._unanswered.items()):
            found.append(fault(None, "unanswered", f"GPU {index}: {error}"))
        for index, handle in sorted(self._handles.items()):
            conditions: list[tuple[GpuFaultKind, str]]
            try:
                conditions = self._conditions(handle)
            except GpuLost as error:
                conditions = [("gpu_lost", f"NVML: {error}")]
            except Unanswered as error:  # a query failed: this GPU's, not the host's
                conditions = [("unanswered", f"a query failed: {error}")]
            devices = self._by_gpu.get(index, [])
            for kind, detail in conditions:
                found += [fault(device.slot, kind, detail) for device in devices]
                if not devices and kind == "gpu_lost":  # a GPU not offered, lost: the host's
                    found.append(fault(None, kind, f"GPU {index}: {detail}"))
        return found

    def _conditions(self, handle: Any) -> list[tuple[GpuFaultKind, str]]:
        nvml = self.nvml
        found: list[tuple[GpuFaultKind, str]] = []
        uncorrected = _ask(
            nvml.nvmlDeviceGetTotalEccErrors,
            handle,
            pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
            pynvml.NVML_VOLATILE_ECC,
        )
        if uncorrected:
            found.append(("ecc_uncorrected", f"{uncorrected} uncorrected ECC errors since reset"))
        if _ask(nvml.nvmlDeviceGetRetiredPagesPendingStatus, handle) == pynvml.NVML_FEATURE_ENABLED:
            found.append(("retired_pages_pending", "memory pages wait to be retired: reset it"))
        remapped = _ask(nvml.nvmlDeviceGetRemappedRows, handle)
        if remapped is not None:
            _, _, pending, failed = remapped
            if failed:
                found.append(("row_remap_failed", "a memory row could not be remapped"))
            elif pending:
                found.append(("row_remap_pending", "memory rows wait to be remapped: reset it"))
        reasons = _ask(nvml.nvmlDeviceGetCurrentClocksEventReasons, handle)
        if reasons is None:  # drivers before 535 know the function by its older name
            reasons = _ask(nvml.nvmlDeviceGetCurrentClocksThrottleReasons, handle) or 0
        if reasons & THERMAL:
            found.append(("thermal_slowdown", "clocks slowed by the hardware (temperature)"))
        if reasons & POWER:
            found.append(("power_slowdown", "clocks slowed by the power brake"))
        return found

    def watch_events(self) -> bool:
        """Register for critical XID events on every GPU that has them; False where NVML
        gives no event set at all."""
        try:
            self._events = self.nvml.nvmlEventSetCreate()
        except pynvml.NVMLError as error:
            log.warning("no NVML event set: %s", error)
            return False
        for index, handle in sorted(self._handles.items()):
            try:
                self.nvml.nvmlDeviceRegisterEvents(
                    handle, pynvml.nvmlEventTypeXidCriticalError, self._events
                )
            except pynvml.NVMLError as error:
                log.warning("GPU %d reports no XID events: %s", index, error)
        return True

    def wait_event(self, timeout_ms: int) -> list[GpuFault]:
        """Block until an XID event arrives or the time is up: run it in a thread."""
        try:
            data = self.nvml.nvmlEventSetWait_v2(self._events, timeout_ms)
        except pynvml.NVMLError_Timeout:
            return []
        if data.eventType != pynvml.nvmlEventTypeXidCriticalError:
            return []
        # The event names the physical GPU (on a GPU in MIG mode, also the instance). It
        # is found by its handle: a GPU that fell off the bus answers no question about it.
        index = next((i for i, h in self._handles.items() if _same_handle(h, data.device)), None)
        devices = self._by_gpu.get(index, []) if index is not None else []
        instance = [d for d in devices if d.mig_instance == data.gpuInstanceId]
        xid = int(data.eventData)
        if not devices:  # a GPU not offered: only what it says of the host matters
            log.warning("GPU %s, which is not offered: XID %d", index, xid)
            said = fault(None, "xid", f"GPU {index}: XID {xid}", xid)
            return [said] if host_suspect(said) else []
        return [fault(device.slot, "xid", f"XID {xid}", xid) for device in instance or devices]

    # --- samples ---

    def samples(self) -> list[GpuSample]:
        taken = []
        for device in self.devices:
            parent = self._handles[device.gpu]
            try:
                taken.append(self._sample(device, parent))
            except (GpuLost, Unanswered):
                taken.append(GpuSample(gpu=device.slot))
        return taken

    def _sample(self, device: Device, parent: Any) -> GpuSample:
        nvml = self.nvml
        rates = _ask(nvml.nvmlDeviceGetUtilizationRates, device.handle)
        memory = _ask(nvml.nvmlDeviceGetMemoryInfo, device.handle)
        temperature = _ask(nvml.nvmlDeviceGetTemperature, parent, pynvml.NVML_TEMPERATURE_GPU)
        milliwatts = _ask(nvml.nvmlDeviceGetPowerUsage, parent)
        return GpuSample(
            gpu=device.slot,
            utilization=rates.gpu if rates is not None else None,
            memory_used_mib=memory.used // MIB if memory is not None else None,
            temperature_c=temperature,
            power_w=milliwatts / 1000 if milliwatts is not None else None,
        )
