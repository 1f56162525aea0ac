"""Admission decisions: ``plan(state, now, policy) -> Plan``, one cycle over a snapshot of
the free GPUs (``placement.Capacity``) and quota use (``quota.QuotaBook``), in phases:

1. ``order``: the waiting jobs in the policy's order (tier, budget, fair share with aging).
2. ``judge``: each in turn starts where quota and placement allow, or is told why not.
3. ``reserve``: the first jobs short of room get a reservation; later jobs backfill only
   where they cannot delay it (R5).
4. ``fill``: past the depth, GPUs still free go to jobs that need no more than are left.
5. ``preempt``: waiting jobs owed room pick the cheapest running jobs to stop; drains.
6. ``elastic``: elastic jobs admitted grow toward their maximum.

``plan`` (the driver) runs them over a ``cycle.Cycle``; ``memo.PlanMemo`` keeps what a
planner may reuse between the cycles of one state. Every job the cycle looks at and leaves
waiting gets a stable reason code (``allot.proto.codes``) with parameters that describe the
job, not the moment; a plan records only the reasons that changed since the log last stated
them, so plans stay small however long the queue is. A cycle looks at ``queue_depth`` jobs
at most and stops once no GPU is free; a job it has never looked at is told QUEUED
(docs/adr/0010). Figures of the moment (free GPUs, position, estimated start) come with
each waiting job in ``Plan.waiting`` for ``allot queue`` and ``allot explain``, and are
recomputable from any plan's basis.
"""

from allot.core.planning.cycle import Reservation, Waiting
from allot.core.planning.memo import PlanMemo
from allot.core.planning.order import queue
from allot.core.planning.plan import MAX_QUEUED, Plan, plan
from allot.core.planning.policy import DEFAULT_POLICY, Policy, policy_hash

__all__ = [
    "DEFAULT_POLICY",
    "MAX_QUEUED",
    "Plan",
    "PlanMemo",
    "Policy",
    "Reservation",
    "Waiting",
    "plan",
    "policy_hash",
    "queue",
]
