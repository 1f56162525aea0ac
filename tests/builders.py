"""Small builders for events in tests: every field defaulted, override what matters."""

import itertools
from typing import Any

import msgspec

from allot.core import State, apply
from allot.proto.events import (
    Admission,
    Event,
    GpuInfo,
    JobExited,
    JobPreempted,
    JobSpec,
    JobStarted,
    JobSubmitted,
    Meta,
    NodeLost,
    NodeRegistered,
    Placement,
    PlanComputed,
)

_ids = itertools.count(1)


def meta(at: int = 1_000) -> Meta:
    return Meta(id=f"e{next(_ids)}", at=at, producer="test")


def spec(gpus: int = 1, account: str = "lab/team", resumable: bool = False) -> JobSpec:
    return JobSpec(account=account, gpus=gpus, command=["true"], resumable=resumable)


def submitted(
    job_id: str,
    gpus: int = 1,
    *,
    resumable: bool = False,
    key: str | None = None,
    at: int = 1_000,
    by: str = "",
    **fields: Any,
) -> JobSubmitted:
    """A submission; ``fields`` set any other spec field (workers, topology, tier...)."""
    job = msgspec.structs.replace(spec(gpus, resumable=resumable), **fields)
    return JobSubmitted(meta=meta(at), job_id=job_id, spec=job, idempotency_key=key, by=by)


def node(
    node_id: str,
    gpus: int = 8,
    *,
    model: str = "SIM",
    rack: str | None = None,
    islands: list[list[int]] | None = None,
) -> NodeRegistered:
    return NodeRegistered(
        meta=meta(),
        node_id=node_id,
        hostname=f"host-{node_id}",
        gpus=[GpuInfo(index=i, model=model, memory_mib=1024) for i in range(gpus)],
        labels={"rack": rack} if rack else {},
        nvlink_islands=islands if islands is not None else [list(range(gpus))],
    )


def plan(*admissions: tuple[str, str, list[int]] | Admission, basis_seq: int = 0) -> PlanComputed:
    """A plan admitting jobs: ``(job, node, gpus)`` for one node, an ``Admission`` for more."""
    return PlanComputed(
        meta=meta(),
        basis_seq=basis_seq,
        now=2_000,
        policy="first-fit",
        policy_hash="x",
        code_version="test",
        admissions=[
            a if isinstance(a, Admission) else admission(a[0], (a[1], a[2])) for a in admissions
        ],
    )


def admission(job_id: str, *placements: tuple[str, list[int]]) -> Admission:
    return Admission(
        job_id=job_id, placements=[Placement(node_id=n, gpus=g) for n, g in placements]
    )


def started(job_id: str, node_id: str, gpus: list[int]) -> JobStarted:
    return JobStarted(
        meta=meta(), job_id=job_id, node_id=node_id, gpus=gpus, pid=123, output_path="/o"
    )


def exited(job_id: str, node_id: str, code: int | None = 0) -> JobExited:
    return JobExited(meta=meta(), job_id=job_id, node_id=node_id, exit_code=code, output_path="/o")


def preempted(job_id: str, lost_gpu_ms: int = 0, attempt: int = 0) -> JobPreempted:
    return JobPreempted(
        meta=meta(),
        job_id=job_id,
        lost_gpu_ms=lost_gpu_ms,
        checkpoint_age_ns=None,
        grace_used_ns=0,
        attempt=attempt,
    )


def lost(node_id: str) -> NodeLost:
    return NodeLost(meta=meta(), node_id=node_id, last_seen_ns=0, timeout_ns=1)


def fold(*events: Event) -> State:
    """The state after these events, at sequences 1, 2, …"""
    state = State()
    for seq, event in enumerate(events, start=1):
        apply(state, seq, event)
    return state
