import pytest

from allot.core import State
from allot.core.accounts import read_tree
from allot.core.authz import cancel_refusal, output_refusal, submit_refusal
from allot.proto.events import AccountsApplied, AccountSettings, Event
from tests import builders as b
from tests.builders import fold

TREE = {
    "lab": AccountSettings(admins=["lea"]),
    "lab/vision": AccountSettings(members=["alice"], admins=["vera"]),
    "lab/open": AccountSettings(),
    "ops": AccountSettings(),
}


def state_with(*events: Event) -> State:
    return fold(AccountsApplied(meta=b.meta(), defined=TREE), *events)


@pytest.mark.parametrize(
    ("principal", "operator", "account", "allowed"),
    [
        ("alice", False, "lab/vision", True),  # a member
        ("vera", False, "lab/vision", True),  # an admin is a member too
        ("lea", False, "lab/vision", True),  # named above it
        ("bob", False, "lab/vision", False),
        ("bob", False, "lab/open", False),  # lab names lea: the path is not open
        ("bob", False, "ops", True),  # nobody named on the path: open to all
        ("bob", False, "nowhere", True),  # not in the tree: nobody named
        ("bob", True, "lab/vision", True),  # an operator
    ],
)
def test_who_may_submit_where(principal: str, operator: bool, account: str, allowed: bool) -> None:
    refusal = submit_refusal(state_with(), principal, operator, account)
    assert (refusal is None) == allowed
    if refusal is not None:
        assert refusal.field == "account"
        assert f"{principal} may not submit to {account}" in refusal.message


def test_who_may_cancel_a_job() -> None:
    state = state_with(b.submitted("j1", account="lab/vision", by="alice"))
    job = state.jobs["j1"]
    assert job.submitted_by == "alice"
    for principal, operator in [("alice", False), ("vera", False), ("lea", False), ("x", True)]:
        assert cancel_refusal(state, principal, operator, job) is None
    refusal = cancel_refusal(state, "bob", False, job)
    assert refusal is not None
    assert "only who submitted it (alice)" in refusal.message


def test_who_may_read_a_jobs_output() -> None:
    """Whoever may cancel a job may read its output: who submitted it, an admin of its
    account or above, an operator; not another member of the same account."""
    state = state_with(b.submitted("j1", account="lab/vision", by="alice"))
    job = state.jobs["j1"]
    for principal, operator in [("alice", False), ("vera", False), ("lea", False), ("x", True)]:
        assert output_refusal(state, principal, operator, job) is None
    for stranger in ("bob", "vera2"):
        refusal = output_refusal(state, stranger, False, job)
        assert refusal is not None
        assert (refusal.field, refusal.value) == ("job_id", "j1")
        assert f"{stranger} may not read the output of j1" in refusal.message
        assert "only who submitted it (alice)" in refusal.message


def test_members_must_be_identity_names() -> None:
    _, errors = read_tree({"lab": {"members": ["ok", "not ok", "x" * 65]}})
    assert [(e.field, e.value) for e in errors] == [
        ("accounts.lab.members", "not ok"),
        ("accounts.lab.members", "x" * 65),
    ]
    assert "identity names" in errors[0].message
    _, errors = read_tree({"lab": {"admins": "vera"}})  # a list, not a name
    assert [e.field for e in errors] == ["accounts.lab.admins"]
    _, errors = read_tree({"lab": {"members": [f"u{i}" for i in range(1_001)]}})
    assert [(e.field, e.value) for e in errors] == [("accounts.lab.members", "1001 names")]
