"""The pure scheduling core: state, fold, validation and planning.

No I/O, no event loop, no wall clock, no unseeded randomness: the planner service, replay
and the simulator call these same functions and must get the same answers. ``apply`` folds
one event into a ``State`` the caller owns; ``plan`` decides from a state and a ``now``.
"""

from allot.core.fold import apply, apply_record, refold
from allot.core.liveness import Hearing, Silence, judge_silence
from allot.core.model import IgnoredEvent, JobRecord, JobStatus, NodeRecord, State
from allot.core.planning import DEFAULT_POLICY, Plan, PlanMemo, Policy, plan, policy_hash, queue
from allot.core.validate import (
    key_reused,
    known_submission,
    reason_too_long,
    validate_cancel,
    validate_submission,
)

__all__ = [
    "DEFAULT_POLICY",
    "Hearing",
    "IgnoredEvent",
    "JobRecord",
    "JobStatus",
    "NodeRecord",
    "Plan",
    "PlanMemo",
    "Policy",
    "Silence",
    "State",
    "apply",
    "apply_record",
    "judge_silence",
    "key_reused",
    "known_submission",
    "plan",
    "policy_hash",
    "queue",
    "reason_too_long",
    "refold",
    "validate_cancel",
    "validate_submission",
]
