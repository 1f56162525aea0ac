"""Admission decisions: ``plan(state, now, policy) -> Plan``.

Order: pending jobs by tier (interactive, batch, best-effort), then by their account's
fair-share rank (``allot.core.fairshare``), lifted one rank per aging step waited up to a
bound so nothing starves, then by submission, then by job id.

Placement: first fit, each job onto the first node (by id) with enough free GPUs, taking
its lowest free indices. A job that does not fit does not block the ones behind it. Every
job left waiting gets a stable reason code; a plan carries only the reasons that changed
since the log last stated them, so the folded state always knows why each job waits while
plans stay small however long the queue is.
"""

import hashlib

import msgspec

from allot.core.budgets import fund
from allot.core.fairshare import FairSharePolicy, Standing, StandingsMemo, standings
from allot.core.model import HOUR_NS, JobRecord, State
from allot.proto.events import TIERS, AccountRank, Admission, PendingReason

# Reason codes: stable strings, part of the log's contract.
NO_NODES = "NO_NODES"
NO_FIT = "NO_FIT"


class Policy(msgspec.Struct, frozen=True, kw_only=True):
    """The knobs of a planning policy; its content hash is recorded with every plan."""

    name: str = "fair-share-first-fit"
    fair_share: FairSharePolicy = FairSharePolicy()
    aging_step_ns: int = HOUR_NS  # each step waited lifts a job one rank...
    aging_max_ranks: int = 24  # ...up to this many


DEFAULT_POLICY = Policy()


class Plan(msgspec.Struct, frozen=True, kw_only=True):
    admissions: list[Admission]
    pending: list[PendingReason]  # new or changed reasons only
    ranks: list[AccountRank] = []  # of the accounts with pending jobs; not a change by itself

    @property
    def empty(self) -> bool:
        """Nothing to record: appending it would only answer every event with a plan."""
        return not self.admissions and not self.pending


def policy_hash(policy: Policy) -> str:
    return hashlib.sha256(msgspec.json.encode(policy)).hexdigest()[:16]


def plan(state: State, now: int, policy: Policy, memo: StandingsMemo | None = None) -> Plan:
    """Decide which pending jobs start where. ``now`` is recorded, not read. A ``memo``
    saves recomputing fair share between plans; it never changes the plan."""
    free = {
        node_id: node.free_gpus()
        for node_id, node in sorted(state.nodes.items())
        if node.schedulable
    }
    ranked = (memo.standings if memo else standings)(state, now, policy.fair_share)
    admissions: list[Admission] = []
    pending: list[PendingReason] = []
    reserved: dict[str, int] = {}  # budget promised to jobs funded earlier in this plan
    for job in _queue(state, ranked, now, policy):
        need = job.spec.gpus
        node_id = next((n for n, gpus in free.items() if len(gpus) >= need), None)
        if node_id is None:
            reason = _why_waiting(job, free)
            if job.reason != reason:
                pending.append(reason)
            continue
        taken, free[node_id] = free[node_id][:need], free[node_id][need:]
        admissions.append(
            Admission(
                job_id=job.job_id,
                node_id=node_id,
                gpus=taken,
                funded=fund(state, job.spec, now, reserved),
            )
        )
    waiting_accounts = sorted({state.jobs[j].spec.account for j in state.pending})
    ranks = [_rank(ranked[account]) for account in waiting_accounts if account in ranked]
    return Plan(admissions=admissions, pending=pending, ranks=ranks)


def queue(state: State, now: int, policy: Policy) -> list[JobRecord]:
    """The pending jobs in the order the planner considers them at ``now``."""
    return _queue(state, standings(state, now, policy.fair_share), now, policy)


def _queue(state: State, ranked: dict[str, Standing], now: int, policy: Policy) -> list[JobRecord]:
    outside_the_tree = len(ranked) + 1

    def order(job: JobRecord) -> tuple[int, int, int, str]:
        lift = min((now - job.submitted_at) // policy.aging_step_ns, policy.aging_max_ranks)
        standing = ranked.get(job.spec.account)
        rank = outside_the_tree if standing is None else standing.rank
        return (TIERS.index(job.spec.tier), rank - max(0, lift), job.submitted_seq, job.job_id)

    return sorted((state.jobs[job_id] for job_id in state.pending), key=order)


def _rank(standing: Standing) -> AccountRank:
    return AccountRank(
        account=standing.account,
        rank=standing.rank,
        share_ppm=standing.share_ppm,
        usage_ppm=standing.usage_ppm,
        usage_gpu_ms=standing.usage_gpu_ms,
        level_factor_ppm=standing.level_factor_ppm,
    )


def _why_waiting(job: JobRecord, free: dict[str, list[int]]) -> PendingReason:
    # Parameters describe the job, not the moment: a reason that changed with every
    # finishing job would have to be restated for the whole queue each time.
    if not free:
        return PendingReason(job_id=job.job_id, code=NO_NODES)
    return PendingReason(job_id=job.job_id, code=NO_FIT, params={"need": job.spec.gpus})
