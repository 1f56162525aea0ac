"""Fold rules for the ledger: the account tree, usage charges, budgets."""

from allot.core.accounts import ancestry, parent_of, settings_problems
from allot.core.entitlement import accrue
from allot.core.model import (
    ACCOUNTS,
    HOUR_NS,
    USAGE,
    AccountUsage,
    Budget,
    FoldRule,
    Ignore,
    State,
    split,
)
from allot.core.validate import ACCOUNT_PATTERN
from allot.proto.events import (
    AccountDefined,
    AccountRemoved,
    AccountsApplied,
    AccountUpdated,
    BudgetExhausted,
    BudgetGranted,
    Event,
    UsageCharged,
)

# --- accounts -----------------------------------------------------------------------------


def _account_defined(state: State, seq: int, e: AccountDefined | AccountUpdated) -> None:
    exists = e.path in state.accounts
    if isinstance(e, AccountDefined) and exists:
        raise Ignore(f"account {e.path} already defined")
    if isinstance(e, AccountUpdated) and not exists:
        raise Ignore(f"unknown account {e.path}")
    parent = parent_of(e.path)
    if parent is not None and parent not in state.accounts:
        raise Ignore(f"parent account {parent} is not defined")
    accrue(state, e.meta.at)  # owed until now at the weights until now
    state.accounts[e.path] = e.settings


def _account_removed(state: State, seq: int, e: AccountRemoved) -> None:
    if e.path not in state.accounts:
        raise Ignore(f"unknown account {e.path}")
    if any(p.startswith(e.path + "/") for p in state.accounts):
        raise Ignore(f"account {e.path} still has child accounts")
    accrue(state, e.meta.at)
    del state.accounts[e.path]


def _accounts_applied(state: State, seq: int, e: AccountsApplied) -> None:
    """All of the apply or none of it: a tree half applied is one nobody declared."""
    tree = dict(state.accounts)
    for path in e.removed:
        if tree.pop(path, None) is None:
            raise Ignore(f"unknown account {path[:200]}")
    for path, settings in e.updated.items():
        if path not in tree:
            raise Ignore(f"unknown account {path[:200]}")
        tree[path] = settings
    for path, settings in e.defined.items():
        if path in tree:
            raise Ignore(f"account {path[:200]} already defined")
        tree[path] = settings
    # Held to what the ledger accepts from a file: the fold of a forged apply cannot put in
    # the tree what no apply could.
    for path, settings in (*e.updated.items(), *e.defined.items()):
        if not ACCOUNT_PATTERN.fullmatch(path):
            raise Ignore(f"{path[:200]!r} is not an account path")
        problem = next(settings_problems(settings), None)
        if problem is not None:
            field, value, message = problem
            raise Ignore(f"account {path} {field}={value}: {message}")
    for path in tree:
        parent = parent_of(path)
        if parent is not None and parent not in tree:
            raise Ignore(f"parent account {parent} of {path} is not defined")
    accrue(state, e.meta.at)
    state.accounts = tree


def _charged(state: State, seq: int, e: UsageCharged) -> None:
    key = (e.job_id, e.attempt)
    run = state.unbilled.get(key)
    if run is None or run.from_ns != e.from_ns:
        raise Ignore(f"{e.job_id} attempt {e.attempt} is not unbilled from {e.from_ns}")
    if run.account != e.path or e.gpu_ms < 0 or e.to_ns <= e.from_ns:
        raise Ignore(f"charge for {e.job_id} does not match its run")
    if run.until_ns is not None and e.to_ns > run.until_ns:
        raise Ignore(f"charge for {e.job_id} runs past the end of its attempt")
    run.from_ns = e.to_ns
    if run.until_ns is not None and run.from_ns >= run.until_ns:
        del state.unbilled[key]
    # What was owed is kept up to what was delivered (never past the charge's own time).
    accrue(state, min(e.to_ns, e.meta.at), hourly=True)
    by_hour = split(e.from_ns, e.to_ns, e.gpu_ms, 0, HOUR_NS)
    for account in ancestry(e.path):
        usage = state.usage.setdefault(account, AccountUsage())
        usage.total_gpu_ms += e.gpu_ms
        for hour, amount in by_hour:
            usage.add(hour, amount)
        budget = state.budgets.get(account)
        if budget is not None:
            for period, amount in split(
                e.from_ns, e.to_ns, e.gpu_ms, budget.starts_at, budget.period_ns
            ):
                if period >= 0:
                    budget.used[period] = budget.used.get(period, 0) + amount


def _granted(state: State, seq: int, e: BudgetGranted) -> None:
    if e.gpu_ms < 0 or e.period_ns <= 0:
        raise Ignore(f"budget for {e.path} is not a positive amount per period")
    # What the account used in the period the new grant starts in still counts against it:
    # granting again does not refill a budget.
    earlier = state.budgets.get(e.path)
    period = None if earlier is None else earlier.period_at(e.starts_at)
    used = {} if earlier is None or period is None else {0: earlier.used.get(period, 0)}
    state.budgets[e.path] = Budget(
        gpu_ms=e.gpu_ms, period_ns=e.period_ns, starts_at=e.starts_at, used=used
    )


def _exhausted(state: State, seq: int, e: BudgetExhausted) -> None:
    budget = state.budgets.get(e.path)
    if budget is None:
        raise Ignore(f"account {e.path} has no budget")
    budget.exhausted[e.period] = None


RULES: dict[type[Event], FoldRule] = {
    AccountDefined: _account_defined,
    AccountUpdated: _account_defined,
    AccountRemoved: _account_removed,
    AccountsApplied: _accounts_applied,
    UsageCharged: _charged,
    BudgetGranted: _granted,
    BudgetExhausted: _exhausted,
}

CHANGES: dict[type[Event], tuple[str, ...]] = {
    AccountDefined: (ACCOUNTS,),
    AccountUpdated: (ACCOUNTS,),
    AccountRemoved: (ACCOUNTS,),
    AccountsApplied: (ACCOUNTS,),
    UsageCharged: (USAGE,),
    BudgetGranted: (),
    BudgetExhausted: (),
}
