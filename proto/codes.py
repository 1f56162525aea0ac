"""The codes a plan states: why a waiting job is not admitted (``PendingReason.code``) and on
what ground a running job is stopped (``Preemption.code``). Stable strings, part of the
log's contract: a code once written is never renamed, and a reader compares against these
names, never against a literal string."""

from typing import Final, Literal

ReasonCode = Literal[
    "NO_NODES",
    "NODE_CORDONED",
    "QUOTA",
    "BUDGET_EXHAUSTED",
    "RESERVED_FOR",
    "NO_BLOCK",
    "BEHIND",
    "NO_FIT",
    "PREEMPTING",
    "QUEUED",
    "ARRAY_LIMIT",
]

NO_NODES: Final = "NO_NODES"  # no schedulable node (of the job's flavor)
NODE_CORDONED: Final = "NODE_CORDONED"  # its flavor exists only on cordoned or unhealthy nodes
QUOTA: Final = "QUOTA"  # a quota or borrowing limit on its path is reached
BUDGET_EXHAUSTED: Final = "BUDGET_EXHAUSTED"  # its budget is used up: idle capacity only
RESERVED_FOR: Final = "RESERVED_FOR"  # it would fit, but only on GPUs held for a higher job
NO_BLOCK: Final = "NO_BLOCK"  # enough GPUs are free, but not in one block of its topology
BEHIND: Final = "BEHIND"  # the GPUs it would fit were taken by higher-ranked jobs this cycle
NO_FIT: Final = "NO_FIT"  # fewer GPUs are free than it needs
PREEMPTING: Final = "PREEMPTING"  # jobs are being stopped for it; their GPUs are kept for it
# Not looked at yet: a cycle stops at the policy's queue depth, or once no GPU is left.
QUEUED: Final = "QUEUED"
# A task of a job array waits for its array's limit: as many of its tasks as the array
# allows already wait in the queue or hold GPUs. Stated by the fold, not by a plan.
ARRAY_LIMIT: Final = "ARRAY_LIMIT"

GroundCode = Literal["TIER", "FUNDED", "RECLAIM", "FAIR_SHARE", "DRAIN", "PACK", "LENT", "STALL"]

TIER: Final = "TIER"  # the waiting job is of a higher tier
FUNDED: Final = "FUNDED"  # the waiting job would be funded and the running one is not
RECLAIM: Final = "RECLAIM"  # the waiting job's account reclaims quota the running one borrows
FAIR_SHARE: Final = "FAIR_SHARE"  # the running job's account is over its fair share
DRAIN: Final = "DRAIN"  # its node is being drained
# it can resume at once on GPUs free elsewhere, and its node then holds the waiting job
PACK: Final = "PACK"
# it started on GPUs set aside for the waiting job's reservation, which can start now
LENT: Final = "LENT"
# it holds back a reservation whose GPUs set aside would idle long for it
STALL: Final = "STALL"
