"""The pure scheduling core: state, fold, validation and planning.

No I/O, no event loop, no wall clock, no unseeded randomness: the planner service, replay
and the simulator call these same functions and must get the same answers. ``apply`` folds
one event into a ``State`` the caller owns; ``plan`` decides from a state and a ``now``.
"""

from allot.core.fold import apply, apply_record
from allot.core.liveness import silent_nodes
from allot.core.model import IgnoredEvent, JobRecord, JobStatus, NodeRecord, State
from allot.core.planner import DEFAULT_POLICY, Plan, PlanMemo, Policy, plan, policy_hash, queue
from allot.core.validate import (
    key_reused,
    known_submission,
    validate_cancel,
    validate_submission,
)

__all__ = [
    "DEFAULT_POLICY",
    "IgnoredEvent",
    "JobRecord",
    "JobStatus",
    "NodeRecord",
    "Plan",
    "PlanMemo",
    "Policy",
    "State",
    "apply",
    "apply_record",
    "key_reused",
    "known_submission",
    "plan",
    "policy_hash",
    "queue",
    "silent_nodes",
    "validate_cancel",
    "validate_submission",
]
