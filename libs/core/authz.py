"""Who may do what, from the account tree in the log (docs/adr/0015).

An operator (a command sent under ``admin.``, which the NATS server lets only operator
identities send) may do anything. Anyone else may submit to an account if they are named in
the ``members`` or ``admins`` of it or of an account above it, and where no account on that
path names anybody, the account is open to all; may cancel, and read the output of, the
jobs they submitted; and an account's admins may cancel, and read the output of, any job of
it or below it.
"""

from allot.core.accounts import ancestry, first_few
from allot.core.model import ArrayRecord, JobRecord, State
from allot.proto.commands import FieldError


def submit_refusal(state: State, principal: str, operator: bool, account: str) -> FieldError | None:
    """Why ``principal`` may not submit to ``account``; None if it may."""
    if operator:
        return None
    named = _named(state, account)
    if not named or principal in named:
        return None
    return FieldError(
        field="account",
        value=account,
        message=f"{principal} may not submit to {account}: only its members and admins may "
        f"({first_few(sorted(named))}), or an operator",
    )


def cancel_refusal(
    state: State, principal: str, operator: bool, job: JobRecord | ArrayRecord
) -> FieldError | None:
    """Why ``principal`` may not cancel ``job`` (or a job array); None if it may."""
    return _owner_refusal(state, principal, operator, job, "cancel")


def output_refusal(
    state: State, principal: str, operator: bool, job: JobRecord
) -> FieldError | None:
    """Why ``principal`` may not read ``job``'s output; None if it may. Whoever may cancel
    a job may read what it prints, and nobody else: output can hold data and secrets."""
    return _owner_refusal(state, principal, operator, job, "read the output of")


def _owner_refusal(
    state: State, principal: str, operator: bool, job: JobRecord | ArrayRecord, action: str
) -> FieldError | None:
    account = job.spec.account
    if operator or job.submitted_by == principal or principal in _admins(state, account):
        return None
    owner = job.submitted_by or "nobody known"
    job_id = job.array_id if isinstance(job, ArrayRecord) else job.job_id
    return FieldError(
        field="job_id",
        value=job_id,
        message=f"{principal} may not {action} {job_id}: only who submitted it "
        f"({owner}), an admin of {account} or above, or an operator may",
    )


def _named(state: State, account: str) -> set[str]:
    """Everyone named as a member or an admin of ``account`` or an account above it."""
    named: set[str] = set()
    for path in ancestry(account):
        settings = state.accounts.get(path)
        if settings is not None:
            named.update(settings.members, settings.admins)
    return named


def _admins(state: State, account: str) -> set[str]:
    admins: set[str] = set()
    for path in ancestry(account):
        settings = state.accounts.get(path)
        if settings is not None:
            admins.update(settings.admins)
    return admins
