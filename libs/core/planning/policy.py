"""The knobs of a planning policy, and its content hash (recorded with every plan)."""

import hashlib
from typing import Literal

import msgspec

from allot.core.fairshare import FairSharePolicy
from allot.core.model import HOUR_NS
from allot.proto.codes import (
    DRAIN,
    FAIR_SHARE,
    FUNDED,
    LENT,
    PACK,
    RECLAIM,
    STALL,
    TIER,
    GroundCode,
)


class Policy(msgspec.Struct, frozen=True, kw_only=True):
    """The knobs of a planning policy; its content hash is recorded with every plan."""

    name: str = "allot"
    fair_share: FairSharePolicy = FairSharePolicy()
    aging_step_ns: int = HOUR_NS  # each step waited lifts a job one rank...
    # ...up to this many: a few, so that waiting cannot outweigh fair share. With a bound
    # as large as the number of accounts, every job that waited a day would pass the work
    # of the least-served account that arrived since (on Philly, its worst-served account
    # got 1% of what it was owed with 24; 76% with 4).
    aging_max_ranks: int = 4
    backfill: bool = True  # reserve for the highest-ranked job that waits (phase 3)
    preemption: bool = True  # stop running jobs for waiting ones that are owed (phase 5)
    preemptors_per_cycle: int = 4  # waiting jobs that may pick victims in one cycle
    restart_overhead_ns: int = 60 * 10**9  # what a restart costs, per GPU, on top of lost work
    time_slice_ns: int | None = 4 * HOUR_NS  # fair share may stop a resumable job after this
    # How the queue is ordered (phase 1): "fair-share" as above; "fifo": by submission only;
    # "tier": by tier, then submission; "multifactor": Slurm's age and fair-share factors.
    order: Literal["fair-share", "fifo", "tier", "multifactor"] = "fair-share"
    strict: bool = False  # stop at the first job that does not fit (no job passes another)
    quotas: bool = True  # honour the accounts' quotas
    # to preempt on
    grounds: tuple[GroundCode, ...] = (TIER, FUNDED, RECLAIM, FAIR_SHARE, DRAIN, PACK, LENT, STALL)
    max_age_ns: int = 7 * 24 * HOUR_NS  # multifactor: the age at which the age factor is full
    # Jobs a cycle looks at, at most (Slurm's default_queue_depth is 100: filling past the
    # depth finds the small jobs a deeper look was for, so half that does as well)...
    queue_depth: int = 50
    # ...and past it, jobs that need no more GPUs than are left, looked at to fill them
    # (phase 4; 0: none).
    fill_depth: int = 100
    # Jobs short of room a cycle reserves for (phase 3): the first as above; each further
    # one, in queue order, where it would start once running jobs end, on GPUs the earlier
    # reservations do not count on. Backfill and lending (LENT) may use what is set aside
    # for any of them; only the first's has the jobs in its way stopped (STALL).
    reservations: int = 1


DEFAULT_POLICY = Policy()


def policy_hash(policy: Policy) -> str:
    return hashlib.sha256(msgspec.json.encode(policy)).hexdigest()[:16]


def uses_fair_share(policy: Policy) -> bool:
    """Whether the policy orders or preempts by fair share; if not, its plans state no
    ranks and computing them would only cost time."""
    return policy.order in ("fair-share", "multifactor") or (
        policy.preemption and FAIR_SHARE in policy.grounds
    )
