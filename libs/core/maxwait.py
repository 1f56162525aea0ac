"""Maximum-wait targets (R11): which waiting jobs have waited longer than their account's
target and have not been reported yet."""

import msgspec

from allot.core.accounts import ancestry
from allot.core.model import State


class Overdue(msgspec.Struct, frozen=True, kw_only=True):
    job_id: str
    account: str  # whose target it is: the job's account or its nearest ancestor with one
    attempt: int
    waited_ns: int
    max_wait_ns: int


def overdue(state: State, now: int) -> list[Overdue]:
    """Pending jobs past their target and not reported in this attempt, by job id. A
    requeued job waits anew from its requeue."""
    targets = {path: s.max_wait_ns for path, s in state.accounts.items() if s.max_wait_ns}
    if not targets:
        return []
    found = []
    for job_id in sorted(state.pending):
        job = state.jobs[job_id]
        if job.max_wait_exceeded:
            continue
        target = next(((a, targets[a]) for a in ancestry(job.spec.account) if a in targets), None)
        if target is None:
            continue
        since = job.queued_at
        if now - since > target[1]:
            found.append(
                Overdue(
                    job_id=job_id,
                    account=target[0],
                    attempt=job.attempts,
                    waited_ns=now - since,
                    max_wait_ns=target[1],
                )
            )
    return found
