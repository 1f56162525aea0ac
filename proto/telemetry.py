"""What node agents publish outside the log (DESIGN rule 5): heartbeats, which carry the
GPU faults the node sees now, and samples of each GPU's load.

Both are sent often and only the latest counts, so a lost one costs nothing: the next one
says it all again. The telemetry service turns faults into log events (transitions only);
the metrics service exports samples. Every field is bounded, so a forged message cannot
make a receiver hold more than a node's worth of GPUs.
"""

from typing import Annotated, Final

import msgspec

from allot.proto.events import GpuFaultKind
from allot.proto.limits import check_json

MAX_GPUS: Final = 1024  # devices of one node, MIG instances included
MAX_DETAIL: Final = 256


class GpuFault(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A fault one device (``gpu``, its index on the node) or the whole host (None) shows,
    as its node saw it. What it means for the cluster, ``allot.core.gpuhealth`` decides."""

    gpu: Annotated[int, msgspec.Meta(ge=0, lt=MAX_GPUS)] | None
    kind: GpuFaultKind
    detail: Annotated[str, msgspec.Meta(max_length=MAX_DETAIL)]
    xid: Annotated[int, msgspec.Meta(ge=0, lt=1 << 32)] | None = None


class Heartbeat(msgspec.Struct, frozen=True, kw_only=True):
    node_id: str
    at: int
    running: int
    faults: Annotated[list[GpuFault], msgspec.Meta(max_length=4 * MAX_GPUS)] = []


class GpuSample(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One GPU's load; a reading NVML could not give is None."""

    gpu: Annotated[int, msgspec.Meta(ge=0, lt=MAX_GPUS)]
    utilization: Annotated[int, msgspec.Meta(ge=0, le=100)] | None = None  # percent
    memory_used_mib: Annotated[int, msgspec.Meta(ge=0)] | None = None
    temperature_c: Annotated[int, msgspec.Meta(ge=-273, le=1000)] | None = None
    power_w: Annotated[float, msgspec.Meta(ge=0)] | None = None


class Samples(msgspec.Struct, frozen=True, kw_only=True):
    node_id: str
    at: int
    gpus: Annotated[list[GpuSample], msgspec.Meta(max_length=MAX_GPUS)]


MAX_BYTES: Final = 1 << 20  # of one heartbeat or one node's samples: NATS's own limit
_HEARTBEAT = msgspec.json.Decoder(Heartbeat)
_SAMPLES = msgspec.json.Decoder(Samples)


def decode_heartbeat(data: bytes) -> Heartbeat:
    """A heartbeat, or ``msgspec.DecodeError``/``ValidationError`` naming what is wrong
    (too large or too deeply nested ones too, before any decoder recurses into them)."""
    check_json(data, MAX_BYTES)
    return _HEARTBEAT.decode(data)


def decode_samples(data: bytes) -> Samples:
    check_json(data, MAX_BYTES)
    return _SAMPLES.decode(data)
