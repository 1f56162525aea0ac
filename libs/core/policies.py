"""The named policies: what ``allot sim`` compares and what the planner service runs by
name (``--policy NAME``), all decided by the same planner code.

- ``fifo``: strict first-in, first-out; nothing passes the first job that waits; no
  backfill, no preemption, no quotas.
- ``priority``: strict tiers (interactive, batch, best-effort), FIFO within a tier, no
  aging, no borrowing limits; a higher tier preempts a lower one (as Kubernetes priority
  classes do).
- ``kueue``: each account a ClusterQueue with its nominal quota (in ``allot sim``
  without ``--accounts``, an equal part of the cluster), borrowing within the cohort, lent
  quota reclaimed by preemption; BestEffortFIFO (a job that does not fit does not block
  the ones behind it).
- ``slurm``: priority/multifactor with equal weights for age (full at 7 days) and fair
  share (Fair Tree, 7-day half-life), EASY backfill, no preemption.
- ``allot``: the default policy (budgets, hierarchical fair share with aging, quotas,
  minimum-runtime protection, backfill, filling past the depth, checkpoint-based
  preemption).

The baselines look at the first 100 jobs of their order per cycle (Slurm's
``default_queue_depth``). ``allot`` looks at 50, then fills GPUs left free with up to 100
deeper jobs that fit (``fill_depth``).
"""

from msgspec.structs import replace

from allot.core.planning import DEFAULT_POLICY, Policy
from allot.proto.codes import DRAIN, RECLAIM, TIER

# Depth and fill as the module docstring says: the baselines' own, not Allot's.
_BASELINE = Policy(queue_depth=100, fill_depth=0)

POLICIES: dict[str, Policy] = {
    "fifo": replace(
        _BASELINE,
        name="fifo",
        order="fifo",
        strict=True,
        backfill=False,
        preemption=False,
        quotas=False,
    ),
    "priority": replace(
        _BASELINE,
        name="priority",
        order="tier",
        backfill=False,
        quotas=False,
        grounds=(TIER, DRAIN),
    ),
    "kueue": replace(
        _BASELINE, name="kueue", order="fifo", backfill=False, grounds=(RECLAIM, DRAIN)
    ),
    "slurm": replace(
        _BASELINE,
        name="slurm",
        order="multifactor",
        backfill=True,
        preemption=False,
        quotas=False,
    ),
    "allot": DEFAULT_POLICY,
}
