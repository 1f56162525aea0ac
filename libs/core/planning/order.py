"""Phase 1: the order in which a cycle looks at the waiting jobs.

By tier (interactive, batch, best-effort); then jobs whose budget is exhausted after the
rest (they run on idle capacity only, R8); then by the account's fair-share rank
(``allot.core.fairshare``) lifted one rank per aging step waited, up to a bound (R11); then
by submission (so the jobs of accounts tied in fair share, which share a rank, go by
submission, whatever the accounts are called); then by job id. Other policies order by
submission only (``fifo``), by tier (``tier``) or by Slurm's age and fair-share factors
(``multifactor``).
"""

import heapq
from collections.abc import Callable, Iterator

from allot.core.accounts import ancestry
from allot.core.fairshare import Standing, standings
from allot.core.model import JobRecord, State
from allot.core.planning.policy import Policy
from allot.proto.events import TIERS


def queue(state: State, now: int, policy: Policy) -> list[JobRecord]:
    """The pending jobs in the order the planner considers them at ``now``."""
    return list(ordered(state, standings(state, now, policy.fair_share), now, policy))


def ordered(
    state: State, ranked: dict[str, Standing], now: int, policy: Policy, fits: int | None = None
) -> Iterator[JobRecord]:
    """The pending jobs in the planner's order, produced lazily: every ordering keeps the
    jobs of one tier and account in submission order, so merging those queues by the key of
    their next job gives the whole order without sorting it, and a cycle that stops early
    pays only for what it looked at. ``fits``: only the jobs that need no more GPUs than
    that (merging the queues split by size)."""
    base, (cap, times, per) = order_key(state, ranked, now, policy)
    groups = (
        list(state.queues.items())
        if fits is None
        else [group for gpus, queues in state.sized_queues.items() if gpus <= fits
              for group in queues.items()]
    )  # fmt: skip
    jobs, queues = state.jobs, [entries for _, entries in groups]
    bases = [base(tier, account) for (tier, account), _ in groups]

    def key(n: int, job: JobRecord) -> int:
        waited = now - job.submitted_at
        lift = (cap if waited > cap else waited if waited > 0 else 0) * times // per
        return bases[n] - (lift << _SEQ_BITS) + job.submitted_seq

    # (key, queue, index in it, the job): keys are unique, so the job is never compared.
    heads = []
    for n, entries in enumerate(queues):
        job = jobs[entries[0][2]]
        heads.append((key(n, job), n, 0, job))
    heapq.heapify(heads)
    replace, pop = heapq.heapreplace, heapq.heappop
    full_lift, long_ago = cap * times // per, now - cap
    while heads:
        _, n, at, job = heads[0]
        # The queue at the top keeps it while its jobs come before the other queues' next,
        # the smaller of the top's children in the heap: without touching the heap.
        rest = len(heads)
        after = heads[1][0] if rest == 2 else min(heads[1][0], heads[2][0]) if rest > 2 else None
        entries, shared = queues[n], bases[n]
        lifted = shared - (full_lift << _SEQ_BITS)  # of a job that waited the most that counts
        yield job
        for i in range(at + 1, len(entries)):
            job = jobs[entries[i][2]]
            # ``key``, inlined: this runs for every job, most of which waited long enough for
            # the full lift
            if job.submitted_at <= long_ago:
                next_key = lifted + job.submitted_seq
            else:
                waited = now - job.submitted_at
                lift = (waited if waited > 0 else 0) * times // per
                next_key = shared - (lift << _SEQ_BITS) + job.submitted_seq
            if after is not None and next_key > after:
                replace(heads, (next_key, n, i, job))
                break
            yield job
        else:
            pop(heads)


# A job's key packs its order into one integer (the merge compares keys a hundred times a
# cycle): the part its queue shares, less what waiting has earned it (its lift), then its
# submission sequence (unique, below 2**64, a log sequence number) in the low bits.
_SEQ_BITS = 64
_FULL = 1_000_000  # a full multifactor factor
# A job's lift: min(its wait, cap) * times // per.
_Lift = tuple[int, int, int]


def order_key(
    state: State, ranked: dict[str, Standing], now: int, policy: Policy
) -> tuple[Callable[[str, str], int], _Lift]:
    """The key of a job as (the part of its (tier, account) queue, how it lifts a job)."""
    outside_the_tree = len(ranked) + 1
    exhausted = exhausted_accounts(state, now)
    tier: dict[str, int] = {name: n for n, name in enumerate(TIERS)}
    step, most = policy.aging_step_ns, policy.aging_max_ranks
    accounts = max(1, len(ranked))

    def rank(account: str) -> int:
        return ranked[account].rank if account in ranked else outside_the_tree

    if policy.order == "fair-share":
        # By tier, then budget exhausted, then fair-share rank lifted one per aging step
        # waited, up to ``most`` (rank - lift + most is in [0, ranks + most]).
        ranks = outside_the_tree + most + 1

        def fair_share(tier_name: str, account: str) -> int:
            group = tier[tier_name] * 2 + (account in exhausted)
            return (group * ranks + rank(account) + most) << _SEQ_BITS

        return fair_share, (most * step, 1, step)
    if policy.order == "multifactor":
        # Slurm's priority/multifactor with equal weights for age and fair share (Fair
        # Tree's factor is the account's rank from the top, as a fraction); highest first.
        # The age factor is the lift: full at ``max_age_ns``.
        def share(_: str, account: str) -> int:
            factor = (accounts - min(rank(account), accounts) + 1) * _FULL // accounts
            return (2 * _FULL - factor) << _SEQ_BITS

        return share, (policy.max_age_ns, _FULL, policy.max_age_ns)
    no_lift = (0, 0, 1)
    if policy.order == "tier":
        return (lambda tier_name, _: tier[tier_name] << _SEQ_BITS), no_lift
    return (lambda _, __: 0), no_lift


def exhausted_accounts(state: State, now: int) -> dict[str, str]:
    """Accounts with jobs whose path holds a used-up budget -> that budget's account."""
    out: dict[str, str] = {}
    if not state.budgets:
        return out
    for account in state.job_accounts:
        for path in ancestry(account):
            budget = state.budgets.get(path)
            if budget is not None and budget.left(now) <= 0:
                out[account] = path
                break
    return out
