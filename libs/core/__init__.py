"""The pure scheduling core: state, fold, validation and planning.

No I/O, no event loop, no wall clock, no unseeded randomness: the planner service, replay
and the simulator call these same functions and must get the same answers. ``apply`` folds
one event into a ``State`` the caller owns; ``plan`` decides from a state and a ``now``.

Each name below loads its module when first used, so that a command line that only submits
a job reads a ``JobRecord`` without loading the fold or the planner. The imports under
``TYPE_CHECKING`` are what type checkers read; ``_NAMES`` is what runs (a test holds the
two alike).
"""

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from allot.core.fold import apply, apply_record, pass_over, refold
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

_NAMES = {
    "allot.core.fold": ("apply", "apply_record", "pass_over", "refold"),
    "allot.core.liveness": ("Hearing", "Silence", "judge_silence"),
    "allot.core.model": ("IgnoredEvent", "JobRecord", "JobStatus", "NodeRecord", "State"),
    "allot.core.planning": (
        "DEFAULT_POLICY", "Plan", "PlanMemo", "Policy", "plan", "policy_hash", "queue"
    ),
    "allot.core.validate": (
        "key_reused", "known_submission", "reason_too_long", "validate_cancel",
        "validate_submission",
    ),
}  # fmt: skip
_MODULE_OF = {name: module for module, names in _NAMES.items() for name in names}

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
    "pass_over",
    "plan",
    "policy_hash",
    "queue",
    "reason_too_long",
    "refold",
    "validate_cancel",
    "validate_submission",
]


def __getattr__(name: str) -> object:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'allot.core' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # the next use finds it without coming here
    return value
