"""Admission decisions: ``plan(state, now, policy) -> Plan``.

The policy here is first-fit: pending jobs in submission order, each onto the first node
(by id) with enough free GPUs, taking its lowest free indices. A job that does not fit does
not block the ones behind it. Every job left waiting gets a stable reason code; a plan
carries only the reasons that changed since the log last stated them, so the folded state
always knows why each job waits while plans stay small however long the queue is.
"""

import hashlib

import msgspec

from allot.core.model import JobRecord, State
from allot.proto.events import Admission, PendingReason

# Reason codes: stable strings, part of the log's contract.
NO_NODES = "NO_NODES"
NO_FIT = "NO_FIT"


class Policy(msgspec.Struct, frozen=True, kw_only=True):
    """The knobs of a planning policy; its content hash is recorded with every plan."""

    name: str = "first-fit"


POLICY_FIRST_FIT = Policy()


class Plan(msgspec.Struct, frozen=True, kw_only=True):
    admissions: list[Admission]
    pending: list[PendingReason]  # new or changed reasons only

    @property
    def empty(self) -> bool:
        """Nothing to record: appending it would only answer every event with a plan."""
        return not self.admissions and not self.pending


def policy_hash(policy: Policy) -> str:
    return hashlib.sha256(msgspec.json.encode(policy)).hexdigest()[:16]


def plan(state: State, now: int, policy: Policy) -> Plan:
    """Decide which pending jobs start where. ``now`` is recorded, not read."""
    free = {
        node_id: node.free_gpus()
        for node_id, node in sorted(state.nodes.items())
        if node.schedulable
    }
    admissions: list[Admission] = []
    pending: list[PendingReason] = []
    for job in _queue(state):
        need = job.spec.gpus
        node_id = next((n for n, gpus in free.items() if len(gpus) >= need), None)
        if node_id is None:
            reason = _why_waiting(job, free)
            if job.reason != reason:
                pending.append(reason)
            continue
        taken, free[node_id] = free[node_id][:need], free[node_id][need:]
        admissions.append(Admission(job_id=job.job_id, node_id=node_id, gpus=taken))
    return Plan(admissions=admissions, pending=pending)


def _queue(state: State) -> list[JobRecord]:
    jobs = [state.jobs[job_id] for job_id in state.pending]
    jobs.sort(key=lambda j: (j.submitted_seq, j.job_id))
    return jobs


def _why_waiting(job: JobRecord, free: dict[str, list[int]]) -> PendingReason:
    # Parameters describe the job, not the moment: a reason that changed with every
    # finishing job would have to be restated for the whole queue each time.
    if not free:
        return PendingReason(job_id=job.job_id, code=NO_NODES)
    return PendingReason(job_id=job.job_id, code=NO_FIT, params={"need": job.spec.gpus})
