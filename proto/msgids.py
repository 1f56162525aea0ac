"""The ``Nats-Msg-Id`` of every event a service appends for a fact it may learn twice.

The stream drops a message whose id it saw within its duplicate window, so an id names
the fact, not the attempt to write it: two services (or one, retrying) that decide the same
thing append it once. Logs already hold these ids and a writer of the new code must dedupe
against a writer of the old one, so a scheme here never changes, not by one character; a
new fact gets a new function. Events without one are appended under their ``meta.id``.
"""

import hashlib
from typing import Literal

import msgspec

from allot.proto.events import AccountsApplied

# What happened to one attempt of a job, as the planner and the preemptor record it.
AttemptStep = Literal["stop", "kill", "requeued", "grace-too-short", "preempted", "max-wait"]
# What a node agent reports of an attempt it ran.
NodeReport = Literal["started", "exited", "cancelled"]


def submission(job_id: str) -> str:
    """The intake's ``JobSubmitted``: a job is submitted once."""
    return f"submit:{job_id}"


def cancellation(job_id: str) -> str:
    """The intake's ``JobCancelRequested``: asking twice is asking once."""
    return f"cancel:{job_id}"


def policy_adoption(policy_hash: str) -> str:
    """The planner's ``PolicyAdopted``: once per policy."""
    return f"policy:{policy_hash}"


def attempt_step(job_id: str, attempt: int, step: AttemptStep) -> str:
    """A step of one attempt of a job: ``StopRequested``, ``KillRequested``,
    ``JobRequeued``, ``GraceTooShort``, ``JobPreempted`` (preemptor) and
    ``MaxWaitExceeded`` (planner)."""
    return f"{job_id}:{attempt}:{step}"


def node_drained(node_id: str, drain: int) -> str:
    """The preemptor's ``NodeDrained``: the end of the node's ``drain``-th drain."""
    return f"{node_id}:drain:{drain}"


def node_report(job_id: str, attempt: int, node_id: str, report: NodeReport) -> str:
    """A node agent's ``JobStarted``, ``JobExited`` or ``JobCancelled`` for an attempt."""
    return f"{job_id}:{attempt}:{node_id}:{report}"


def checkpoint(job_id: str, step: int) -> str:
    """A node agent's ``JobCheckpointed``: the job's ``step``-th checkpoint."""
    return f"{job_id}:checkpoint:{step}"


def health_change(node_id: str, gpu: int | None, healthy: bool, basis: int) -> str:
    """Telemetry's ``NodeHealthChanged`` for the node (``gpu`` None) or one GPU, judged
    from a node record that had seen ``basis`` health changes."""
    device = "node" if gpu is None else gpu
    direction = "up" if healthy else "down"
    return f"health:{node_id}:{device}:{direction}:{basis}"


def suspect_drain(node_id: str, drains: int) -> str:
    """Telemetry's ``NodeCordoned`` of a suspect host, after ``drains`` drains begun."""
    return f"suspect:{node_id}:{drains}"


def node_loss(node_id: str, registered_at: int) -> str:
    """Telemetry's ``NodeLost``: one loss per registration of the node."""
    return f"lost:{node_id}:{registered_at}"


def usage_charge(job_id: str, attempt: int, from_ns: int, to_ns: int) -> str:
    """The ledger's ``UsageCharged``. The end is part of the id: a charge the fold refused
    (it ran past an exit not yet folded) must not block the right one as a duplicate."""
    return f"usage:{job_id}:{attempt}:{from_ns}:{to_ns}"


def budget_exhausted(path: str, grant_starts_at: int, period: int) -> str:
    """The ledger's ``BudgetExhausted``: once per period of one grant to the account."""
    return f"exhausted:{path}:{grant_starts_at}:{period}"


def accounts_apply(event: AccountsApplied) -> str:
    """The ledger's ``AccountsApplied``: the same changes computed from the same log
    position are one message."""
    body = msgspec.json.encode([event.basis_seq, event.defined, event.updated, event.removed])
    return f"accounts:{hashlib.blake2b(body, digest_size=12).hexdigest()}"


def quarantine(seq: int) -> str:
    """An operator's ``EventQuarantined`` of the event at ``seq``."""
    return f"quarantine:{seq}"
