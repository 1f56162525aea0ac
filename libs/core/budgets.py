"""Budgets of GPU time (R8): who is funded, which budgets ran out, and reading a grant.

A job is funded when it declares a minimum runtime and every account on its path that has
a budget still has enough left in the current period to cover that minimum runtime on its
GPUs (and at least one such budget exists). Funded work is
protected; unfunded work runs on idle capacity and may be preempted by funded work.
"""

import math
from typing import Final

from allot.core.accounts import ancestry, parse_duration
from allot.core.charging import capacity, gpu_ms
from allot.core.model import State
from allot.core.validate import ACCOUNT_PATTERN
from allot.proto.commands import BudgetGrantRequest, FieldError
from allot.proto.events import JobSpec

MS_PER_HOUR = 3_600_000
NS_PER_HOUR = 3600 * 10**9
MAX_PERIOD_NS: Final = 366 * 24 * NS_PER_HOUR  # a year, leap or not
# Ten times the GPUs of today's largest clusters: a grant of more GPU-hours than this many
# GPUs deliver in the period is a typo (and 1e308 of them is no number of milliseconds).
MAX_CLUSTER_GPUS: Final = 1_000_000


def protection(spec: JobSpec) -> int:
    """GPU-ms a job's funding reserves: its GPUs times its minimum runtime."""
    return spec.total_gpus * (spec.min_runtime_ns // 1_000_000)


def fund(state: State, spec: JobSpec, now: int, reserved: dict[str, int]) -> bool:
    """Whether the job is funded, and if so, reserve its protected minimum runtime
    (GPUs x minimum runtime) in every budget on its path, in ``reserved``: one plan cannot
    fund more than the budgets hold (``reserved`` starts as what earlier plans promised,
    ``promised``)."""
    if spec.min_runtime_ns <= 0:
        return False
    cost = protection(spec)
    budgeted = [a for a in ancestry(spec.account) if a in state.budgets]
    if not budgeted:
        return False
    if any(state.budgets[a].left(now) - reserved.get(a, 0) < cost for a in budgeted):
        return False
    for account in budgeted:
        reserved[account] = reserved.get(account, 0) + cost
    return True


def promised(state: State, now: int) -> dict[str, int]:
    """GPU-ms of each budget that earlier plans promised and the ledger has not charged
    yet. Without it, every plan would see a budget whole until the ledger's next charge, and
    fund again protection that earlier plans had already funded from it. It is:

    - for every run not charged to its end, what the ledger will charge for it from its
      last charge to its end (``now`` while it runs), DRF-weighted as the ledger charges;
      for a funded run still running, to the end of its minimum runtime at least (its
      protection, bought when it was admitted);
    - for a funded job admitted and not started yet (nothing to charge until its node
      starts it), what its funding reserved: its GPUs times its minimum runtime.
    """
    out: dict[str, int] = {}
    if not state.budgets:
        return out
    jobs, unbilled, cluster = state.jobs, state.unbilled, capacity(state)

    def owe(account: str, amount: int) -> None:
        for path in ancestry(account):
            if amount and path in state.budgets:
                out[path] = out.get(path, 0) + amount

    for (job_id, attempt), run in unbilled.items():
        end = run.until_ns if run.until_ns is not None else now
        job = jobs.get(job_id)
        if (
            run.until_ns is None
            and job is not None
            and job.funded
            and job.attempts == attempt
            and job.started_at is not None
        ):
            end = max(end, job.started_at + job.spec.min_runtime_ns)
        if end > run.from_ns:
            owe(run.account, gpu_ms(run, end - run.from_ns, cluster))
    for job_id in state.holders:
        job = jobs[job_id]
        if job.funded and (job_id, job.attempts) not in unbilled:
            owe(job.spec.account, protection(job.spec))
    return out


def exhausted_now(state: State, now: int) -> list[tuple[str, int, int, int]]:
    """Budgets used up in their current period and not yet announced:
    (account, period, used GPU-ms, budget GPU-ms), by account."""
    due = []
    for path, budget in sorted(state.budgets.items()):
        period = budget.period_at(now)
        if period is None or period in budget.exhausted:
            continue
        used = budget.used.get(period, 0)
        if used >= budget.gpu_ms:
            due.append((path, period, used, budget.gpu_ms))
    return due


def read_grant(
    request: BudgetGrantRequest, state: State
) -> tuple[tuple[int, int, int | None] | None, list[FieldError]]:
    """(GPU-ms per period, period in ns, share in ppm or None), or what is wrong."""
    errors: list[FieldError] = []

    def bad(field: str, value: object, message: str) -> None:
        errors.append(FieldError(field=field, value=str(value)[:200], message=message))

    if not ACCOUNT_PATTERN.fullmatch(request.account):
        bad("account", request.account, "an account path such as 'ml/vision'")
    elif state.accounts and request.account not in state.accounts:
        bad("account", request.account, "no such account; `allot accounts show` lists them")
    try:
        period_ns = parse_duration(request.period)
    except ValueError as error:
        bad("period", request.period, str(error)[:200])
        period_ns = 0
    else:
        if not 0 < period_ns <= MAX_PERIOD_NS:
            bad("period", request.period, "a positive duration of at most 366d")
    period_or_longest = period_ns if 0 < period_ns <= MAX_PERIOD_NS else MAX_PERIOD_NS
    most_hours = MAX_CLUSTER_GPUS * period_or_longest // NS_PER_HOUR
    if (request.gpu_hours is None) == (request.share is None):
        bad("gpu_hours", request.gpu_hours, "give either --gpu-hours or --share, not both")
    elif request.gpu_hours is not None and not (
        math.isfinite(request.gpu_hours) and 0 < request.gpu_hours <= most_hours
    ):
        bad(
            "gpu_hours",
            request.gpu_hours,
            f"a positive number of GPU-hours per period, at most {most_hours} "
            f"({MAX_CLUSTER_GPUS} GPUs for the whole period)",
        )
    elif request.share is not None and not 0 < request.share <= 1:
        bad("share", request.share, "a fraction of the cluster's GPU time, above 0 and at most 1")
    elif request.share is not None and capacity(state).gpus == 0:
        bad("share", request.share, "no nodes are registered, so a share has no size yet")
    if errors:
        return None, errors
    share_ppm: int | None = None
    if request.gpu_hours is not None:
        gpu_ms = round(request.gpu_hours * MS_PER_HOUR)
    else:
        assert request.share is not None
        share_ppm = round(request.share * 1_000_000)
        gpu_ms = capacity(state).gpus * (period_ns // 1_000_000) * share_ppm // 1_000_000
    if gpu_ms <= 0:  # above 0 as given, yet nothing once in whole GPU-ms (and ppm)
        field = "gpu_hours" if share_ppm is None else "share"
        bad(field, getattr(request, field), "too small to hold anything: a budget is at "
            "least 1 GPU-ms per period, a share at least 0.000001")  # fmt: skip
        return None, errors
    return (gpu_ms, period_ns, share_ppm), []
