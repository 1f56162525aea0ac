"""What a node's GPU faults mean for the cluster: the judgment the telemetry service makes
of each heartbeat, given what the log already says (docs/adr/0017).

A node reports the faults its GPUs show now (``allot.proto.telemetry.GpuFault``); only
transitions enter the log:

- a fault on a GPU the log holds healthy turns it unhealthy (``NodeHealthChanged`` for that
  GPU), and no work is placed on it again until it recovers;
- *sticky* faults (an XID, uncorrected ECC errors, a failed row remap) say the GPU broke;
  it stays unhealthy until an operator uncordons the node after repair, whatever later
  reports say. The others (pending page retirement or row remap, a thermal or power
  slowdown, a lost GPU) are conditions: the GPU recovers once its node has reported it
  free of them for ``recover_ns``, so one that comes and goes does not flap the log;
- a fault that makes the whole host suspect (the GPU fell off the bus, NVLink or GSP
  errors, an uncontained ECC error, a GPU that answers nothing) also cordons the node and
  drains it gracefully (R15, docs/adr/0020): jobs that can resume stop as they pass their
  minimum runtime, the others are left to finish. One GPU's query that failed (a timeout)
  is only that GPU's condition.

XIDs an application causes itself (13, 31, 43, 45, 68, 109: illegal addresses, exceptions,
a killed context) say nothing of the GPU and are ignored, as NVIDIA's device plugin does.
"""

from collections.abc import Iterable
from typing import Final

import msgspec

from allot.core.model import GpuFaultRecord, NodeRecord
from allot.proto.telemetry import GpuFault

STICKY: Final = frozenset({"xid", "ecc_uncorrected", "row_remap_failed"})
APPLICATION_XIDS: Final = frozenset({13, 31, 43, 45, 68, 109})
# XID -> what it says, for those after which the whole host is suspect.
HOST_SUSPECT_XIDS: Final = {
    62: "internal micro-controller halt",
    74: "NVLink error",
    79: "the GPU has fallen off the bus",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
}
RECOVER_NS: Final = 60 * 10**9
# A suspect host's drain is graceful, not ``--now``: stopping a job that cannot resume loses
# it for certain, while left alone it may well finish (the fault is often another GPU's);
# one whose own GPU is gone fails by itself. An operator can still hasten it.
SUSPECT_DRAIN_NOW: Final = False


class Change(msgspec.Struct, frozen=True, kw_only=True):
    """One health transition to record: of a GPU, or of the node where ``gpu`` is None."""

    gpu: int | None
    healthy: bool
    reason: str
    fault: str | None = None


class Judgment(msgspec.Struct, frozen=True, kw_only=True):
    changes: list[Change]
    cordon: str | None  # why the host is suspect, where it now must be drained
    # Device (None: the node) -> since when its node has reported it free of a fault the
    # log still holds; the judge of the next heartbeat takes it back.
    clear_since: dict[int | None, int]


def counts(fault: GpuFault) -> bool:
    """Whether a reported fault says anything about the hardware."""
    return not (fault.kind == "xid" and fault.xid in APPLICATION_XIDS)


def host_suspect(fault: GpuFault) -> bool:
    """A lost GPU, a GPU the host cannot read at all, or an XID of the host's own."""
    if fault.kind == "xid":
        return fault.xid in HOST_SUSPECT_XIDS
    # One GPU's query that failed is that GPU's trouble; the host's own is not.
    return fault.kind == "gpu_lost" or (fault.kind == "unanswered" and fault.gpu is None)


def judge(
    node: NodeRecord,
    reported: Iterable[GpuFault],
    *,
    now: int,
    clear_since: dict[int | None, int],
    recover_ns: int = RECOVER_NS,
) -> Judgment:
    """The transitions one heartbeat of ``node`` calls for. Faults of devices the node did
    not register are ignored: a node speaks only of its own GPUs."""
    devices = {g.index for g in node.gpus}
    faults: dict[int | None, GpuFault] = {}
    for fault in reported:
        if counts(fault) and (fault.gpu is None or fault.gpu in devices):
            known = faults.get(fault.gpu)
            # Of several faults of one device, the one that says the most is kept.
            if known is None or _weight(fault) > _weight(known):
                faults[fault.gpu] = fault
    changes: list[Change] = []
    cordon = None
    for device, fault in sorted(faults.items(), key=lambda item: _order(item[0])):
        recorded = node.fault if device is None else node.gpu_faults.get(device)
        # A condition the log holds that turns out to be a breakage is recorded as one.
        if recorded is None or (fault.kind in STICKY and recorded.kind not in STICKY):
            changes.append(
                Change(gpu=device, healthy=False, reason=_describe(fault), fault=fault.kind)
            )
        if host_suspect(fault) and not node.draining and cordon is None:
            cordon = f"{_name(device)}: {_describe(fault)}"
    held: dict[int | None, GpuFaultRecord] = {None: node.fault} if node.fault else {}
    held.update((gpu, fault) for gpu, fault in node.gpu_faults.items() if gpu in devices)
    still_clear: dict[int | None, int] = {}
    for device, recorded in sorted(held.items(), key=lambda item: _order(item[0])):
        if device in faults or recorded.kind in STICKY:
            continue
        since = clear_since.get(device, now)
        if now - since >= recover_ns:
            reason = f"{recorded.kind.replace('_', ' ')} no longer seen"
            changes.append(Change(gpu=device, healthy=True, reason=reason))
        else:
            still_clear[device] = since
    return Judgment(changes=changes, cordon=cordon, clear_since=still_clear)


def _describe(fault: GpuFault) -> str:
    if fault.kind == "xid" and fault.xid in HOST_SUSPECT_XIDS:
        said = f"XID {fault.xid} ({HOST_SUSPECT_XIDS[fault.xid]})"
        return said if fault.detail == f"XID {fault.xid}" else f"{said}: {fault.detail}"
    return fault.detail


def _name(device: int | None) -> str:
    return "the host" if device is None else f"GPU {device}"


def _weight(fault: GpuFault) -> tuple[bool, bool]:
    return host_suspect(fault), fault.kind in STICKY


def _order(device: int | None) -> int:
    return -1 if device is None else device
