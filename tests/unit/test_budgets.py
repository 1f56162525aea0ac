import msgspec
import pytest

from allot.core import State, apply
from allot.core.budgets import exhausted_now, funded, read_grant
from allot.proto.commands import BudgetGrantRequest
from allot.proto.events import (
    AccountDefined,
    AccountSettings,
    BudgetExhausted,
    BudgetGranted,
    UsageCharged,
)
from tests import builders as b
from tests.builders import fold

HOUR = 3600 * 10**9
WEEK = 7 * 24 * HOUR


def grant(path: str, gpu_ms: int, starts_at: int = 0) -> BudgetGranted:
    return BudgetGranted(
        meta=b.meta(), path=path, gpu_ms=gpu_ms, period_ns=WEEK, starts_at=starts_at
    )


def charge(path: str, gpu_ms: int, at: int) -> list[object]:
    """A one-GPU job of ``path`` that ran and was charged ``gpu_ms`` at ``at``."""
    job_id = f"j-{path.replace('/', '-')}-{at}"
    spec = msgspec.structs.replace(b.spec(), account=path)
    started = b.started(job_id, "n1", [0])
    return [
        msgspec.structs.replace(b.submitted(job_id), spec=spec),
        b.plan((job_id, "n1", [0])),
        msgspec.structs.replace(started, meta=msgspec.structs.replace(started.meta, at=at - 1)),
        UsageCharged(
            meta=b.meta(),
            path=path,
            job_id=job_id,
            attempt=0,
            from_ns=at - 1,
            to_ns=at,
            gpu_ms=gpu_ms,
        ),
        b.exited(job_id, "n1"),
    ]


def spec(account: str, min_runtime_ns: int = HOUR):  # type: ignore[no-untyped-def]
    return msgspec.structs.replace(b.spec(), account=account, min_runtime_ns=min_runtime_ns)


def test_funded_needs_a_minimum_runtime_and_budget_left_on_the_whole_path() -> None:
    state = fold(b.node("n1", 1), grant("lab", 10_000), grant("lab/team", 5_000))
    assert funded(state, spec("lab/team"), now=1)
    assert not funded(state, spec("lab/team", min_runtime_ns=0), now=1)  # declares no contract
    assert not funded(state, spec("other"), now=1)  # no budget anywhere on its path
    for event in charge("lab/team", 5_000, at=HOUR):
        apply(state, state.seq + 1, event)  # type: ignore[arg-type]
    assert not funded(state, spec("lab/team"), now=HOUR + 1)  # its own budget is used up
    assert funded(state, spec("lab/other"), now=HOUR + 1)  # lab still has 5,000 left
    assert funded(state, spec("lab/team"), now=WEEK + 1)  # a new period


def test_a_used_up_budget_is_announced_once_per_period() -> None:
    state = fold(b.node("n1", 1), grant("lab", 1_000), *charge("lab", 1_500, at=HOUR))  # type: ignore[arg-type]
    assert exhausted_now(state, now=HOUR + 1) == [("lab", 0, 1_500, 1_000)]
    apply(
        state,
        state.seq + 1,
        BudgetExhausted(
            meta=b.meta(), path="lab", period=0, used_gpu_ms=1_500, budget_gpu_ms=1_000
        ),
    )
    assert exhausted_now(state, now=HOUR + 2) == []
    assert exhausted_now(state, now=WEEK + 1) == []  # the next period has nothing used yet


def test_a_grant_in_gpu_hours_or_as_a_share_of_the_cluster() -> None:
    state = fold(b.node("n1", 8), b.node("n2", 8))
    assert read_grant(BudgetGrantRequest(account="lab", gpu_hours=10, period="7d"), state) == (
        (36_000_000, WEEK, None),
        [],
    )
    # A quarter of 16 GPUs for a day: 4 GPU-days.
    assert read_grant(BudgetGrantRequest(account="lab", share=0.25, period="1d"), state) == (
        (4 * 24 * 3_600_000, 24 * HOUR, 250_000),
        [],
    )


@pytest.mark.parametrize(
    ("request_fields", "field"),
    [
        ({"gpu_hours": 0}, "gpu_hours"),
        ({"gpu_hours": 5, "share": 0.5}, "gpu_hours"),
        ({}, "gpu_hours"),
        ({"share": 1.5}, "share"),
        ({"gpu_hours": 5, "period": "weekly"}, "period"),
        ({"gpu_hours": 5, "account": "Lab"}, "account"),
        ({"gpu_hours": 5, "account": "nobody"}, "account"),
    ],
)
def test_a_bad_grant_names_the_field(request_fields: dict[str, object], field: str) -> None:
    state = fold(
        b.node("n1", 8), AccountDefined(meta=b.meta(), path="lab", settings=AccountSettings())
    )
    request = BudgetGrantRequest(**{"account": "lab", **request_fields})  # type: ignore[arg-type]
    grant_, errors = read_grant(request, state)
    assert grant_ is None
    assert [e.field for e in errors] == [field]


def test_a_share_needs_nodes_to_have_a_size() -> None:
    _, errors = read_grant(BudgetGrantRequest(account="lab", share=0.5), State())
    assert "no nodes" in errors[0].message
