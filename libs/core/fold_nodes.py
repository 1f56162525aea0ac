"""Fold rules for nodes: registration, health, loss, cordons."""

from allot.core.entitlement import accrue
from allot.core.fold_jobs import end_job, requeue
from allot.core.model import (
    NODES,
    FoldRule,
    GpuFaultRecord,
    Ignore,
    JobStatus,
    NodeRecord,
    State,
)
from allot.proto.events import (
    Event,
    NodeCordoned,
    NodeDrained,
    NodeHealthChanged,
    NodeLost,
    NodeRegistered,
    NodeUncordoned,
)


def _node(state: State, node_id: str) -> NodeRecord:
    node = state.nodes.get(node_id)
    if node is None:
        raise Ignore(f"unknown node {node_id}")
    return node


# --- nodes ------------------------------------------------------------------------------


def _registered(state: State, seq: int, e: NodeRegistered) -> None:
    accrue(state, e.meta.at)  # owed until now with the GPUs there were
    node = state.nodes.get(e.node_id)
    if node is None:
        state.nodes[e.node_id] = NodeRecord(
            node_id=e.node_id,
            hostname=e.hostname,
            gpus=list(e.gpus),
            registered_at=e.meta.at,
            registered_seq=seq,
            cpus=e.cpus,
            memory_mib=e.memory_mib,
            labels=dict(e.labels),
            nvlink_islands=[list(island) for island in e.nvlink_islands],
        )
        return
    # A restarted agent: the node is back; what its jobs hold stays held until they end.
    # Health is not reset: only a health transition changes it, except for devices that
    # are gone or are other devices now (a GPU re-partitioned, a board replaced).
    kept = _faults_of_the_same_devices(node, e)
    if kept != node.gpu_faults:
        node.gpu_faults = kept
        node.health_changes += 1
    node.hostname = e.hostname
    node.gpus = list(e.gpus)
    node.cpus, node.memory_mib = e.cpus, e.memory_mib
    node.labels = dict(e.labels)
    node.nvlink_islands = [list(island) for island in e.nvlink_islands]
    node.registered_at = e.meta.at
    node.lost = False


def _faults_of_the_same_devices(node: NodeRecord, e: NodeRegistered) -> dict[int, GpuFaultRecord]:
    """The recorded faults of devices the node registers again: the same index, and the
    same UUID where both registrations know it."""
    before = {gpu.index: gpu.uuid for gpu in node.gpus}
    now = {gpu.index: gpu.uuid for gpu in e.gpus}
    return {
        index: fault
        for index, fault in node.gpu_faults.items()
        if index in now and (not now[index] or not before.get(index) or now[index] == before[index])
    }


def _health(state: State, seq: int, e: NodeHealthChanged) -> None:
    node = _node(state, e.node_id)
    fault = (
        None if e.healthy else GpuFaultRecord(kind=e.fault or "", reason=e.reason, since=e.meta.at)
    )
    if e.gpu is None:
        node.healthy, node.fault = e.healthy, fault
    else:
        if e.gpu not in {g.index for g in node.gpus}:
            raise Ignore(f"node {e.node_id} has no GPU {e.gpu}")
        faults = dict(node.gpu_faults)
        if fault is None:
            faults.pop(e.gpu, None)
        else:
            faults[e.gpu] = fault
        node.gpu_faults = faults
    node.health_changes += 1


def _lost(state: State, seq: int, e: NodeLost) -> None:
    node = _node(state, e.node_id)
    if node.lost:
        raise Ignore(f"node {e.node_id} already lost")
    accrue(state, e.meta.at)  # owed until now with the GPUs there were
    node.lost = True
    holders = sorted(set(node.allocated.values()))
    # Its jobs are known to have run only until the node was last heard from.
    for job_id in holders:
        job = state.jobs[job_id]
        heard_of = max(e.last_seen_ns, job.started_at or 0)
        if job.spec.resumable and not job.cancel_requested:
            requeue(state, job, heard_of, f"node {e.node_id} lost")
        else:
            end_job(state, job, JobStatus.LOST, heard_of, f"node {e.node_id} lost")


def _cordoned(state: State, seq: int, e: NodeCordoned) -> None:
    node = _node(state, e.node_id)
    node.cordoned = True
    node.cordon_reason, node.cordoned_by = e.reason, e.by
    if e.drain and not node.draining:
        node.draining, node.drained = True, False
        node.drain_now = e.now
        node.drains += 1
    elif e.drain and e.now:  # hastened; a drain under way is never made gentler
        node.drain_now = True


def _uncordoned(state: State, seq: int, e: NodeUncordoned) -> None:
    node = _node(state, e.node_id)
    node.cordoned = node.draining = node.drain_now = node.drained = False
    node.cordon_reason = node.cordoned_by = ""
    # The operator vouches for the host: every fault recorded is forgotten, those that
    # only an operator clears (XIDs) too. A fault the host still shows is reported again.
    if node.gpu_faults or node.fault is not None:
        node.gpu_faults, node.fault, node.healthy = {}, None, True
        node.health_changes += 1


def _drained(state: State, seq: int, e: NodeDrained) -> None:
    node = _node(state, e.node_id)
    if not node.draining or node.allocated or node.drained:
        raise Ignore(f"node {e.node_id} is not a drain that just emptied")
    node.drained = True


RULES: dict[type[Event], FoldRule] = {
    NodeRegistered: _registered,
    NodeHealthChanged: _health,
    NodeLost: _lost,
    NodeCordoned: _cordoned,
    NodeUncordoned: _uncordoned,
    NodeDrained: _drained,
}

CHANGES: dict[type[Event], tuple[str, ...]] = dict.fromkeys(RULES, (NODES,))
