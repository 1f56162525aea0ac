import msgspec
import pytest

from allot.core import DEFAULT_POLICY, State, apply, plan
from allot.core.budgets import exhausted_now, fund, promised, read_grant
from allot.core.charging import charges_due
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


def funded(state: State, job: object, now: int) -> bool:
    return fund(state, job, now, {})  # type: ignore[arg-type]


MINUTE_MS = 60_000


def test_funded_needs_a_minimum_runtime_and_budget_for_it_on_the_whole_path() -> None:
    # Jobs of 1 GPU with a 1-hour minimum runtime cost 60 GPU-minutes each.
    state = fold(b.node("n1", 1), grant("lab", 120 * MINUTE_MS), grant("lab/team", 60 * MINUTE_MS))
    assert funded(state, spec("lab/team"), now=1)
    assert not funded(state, spec("lab/team", min_runtime_ns=0), now=1)  # declares no contract
    assert not funded(state, spec("other"), now=1)  # no budget anywhere on its path
    for event in charge("lab/team", 30 * MINUTE_MS, at=HOUR):
        apply(state, state.seq + 1, event)  # type: ignore[arg-type]
    assert not funded(state, spec("lab/team"), now=HOUR + 1)  # 30 left: not enough for 60
    assert funded(state, spec("lab/other"), now=HOUR + 1)  # lab still has 90 left
    assert funded(state, spec("lab/team"), now=WEEK + 1)  # a new period


def test_one_plan_cannot_fund_more_than_the_budget_holds() -> None:
    state = fold(b.node("n1", 8), grant("lab", 150 * MINUTE_MS))
    reserved: dict[str, int] = {}
    decisions = [fund(state, spec("lab/team"), 1, reserved) for _ in range(4)]
    assert decisions == [True, True, False, False]
    assert reserved == {"lab": 120 * MINUTE_MS}


@pytest.mark.parametrize("started", [True, False], ids=["running", "admitted, not started"])
def test_a_later_plan_counts_the_protection_that_earlier_plans_funded(started: bool) -> None:
    # 100 GPU-minutes fund one 1-GPU job with a 1-hour minimum runtime. Once it is admitted,
    # the hour promised to it is not charged yet (nor is anything, before its node has
    # started it): what is left does not fund a second one.
    state = fold(
        b.node("n1", 2),
        grant("lab", 100 * MINUTE_MS),
        b.submitted("first", account="lab/team", min_runtime_ns=HOUR),
    )
    first = plan(state, 2_000, DEFAULT_POLICY)
    assert [(a.job_id, a.funded) for a in first.admissions] == [("first", True)]
    start = b.started("first", "n1", first.admissions[0].placements[0].gpus)
    later = 2 * MINUTE_MS * 1_000_000
    for event in (
        first.recorded(
            b.meta(2_000), basis_seq=state.seq, now=2_000, policy="p", policy_hash="h",
            code_version="test",
        ),
        *([msgspec.structs.replace(start, meta=b.meta(3_000))] if started else []),
        b.submitted("second", account="lab/team", min_runtime_ns=HOUR, at=later),
    ):  # fmt: skip
        apply(state, state.seq + 1, event)
    second = plan(state, later, DEFAULT_POLICY)
    assert [(a.job_id, a.funded) for a in second.admissions] == [("second", False)]


def test_what_is_promised_is_the_use_not_charged_yet_and_the_rest_of_funded_protection() -> None:
    minute = 60 * 10**9

    def at(event, ns: int):  # type: ignore[no-untyped-def]
        return msgspec.structs.replace(event, meta=b.meta(ns))

    funded_run = msgspec.structs.replace(b.admission("f", ("n1", [0])), funded=True)
    state = fold(
        b.node("n1", 4),
        grant("lab", 10**9),
        grant("lab/team", 10**9),
        b.submitted("f", account="lab/team", min_runtime_ns=HOUR),
        b.submitted("u", 2, account="lab/other", min_runtime_ns=HOUR),
        b.submitted("gone", account="lab/other"),
        b.plan(funded_run, ("u", "n1", [1, 2]), ("gone", "n1", [3])),
        at(b.started("f", "n1", [0]), 0),
        at(b.started("u", "n1", [1, 2]), 0),
        at(b.started("gone", "n1", [3]), 0),
        at(b.exited("gone", "n1"), 5 * minute),  # stopped, its 5 minutes not charged yet
        UsageCharged(
            meta=b.meta(6 * minute), path="lab/other", job_id="u", attempt=0, from_ns=0,
            to_ns=6 * minute, gpu_ms=2 * 6 * MINUTE_MS,
        ),
    )  # fmt: skip
    # f: the rest of its hour; u: 2 GPUs for the 4 minutes since its charge; gone: 5 minutes.
    assert promised(state, 10 * minute) == {
        "lab": (60 + 8 + 5) * MINUTE_MS,
        "lab/team": 60 * MINUTE_MS,
    }
    # Past its protection, f has promised only what it used.
    assert promised(state, 70 * minute)["lab/team"] == 70 * MINUTE_MS
    assert promised(fold(b.node("n1", 4)), 10 * minute) == {}  # no budgets: nothing to count


def test_use_not_charged_yet_is_promised_as_the_ledger_will_charge_it() -> None:
    # One GPU with all of the node's CPUs pays for its dominant share: the whole node (R10).
    node = msgspec.structs.replace(b.node("n1", 8), cpus=16)
    start = b.started("cpus", "n1", [0])
    state = fold(
        node,
        grant("lab", 10**9),
        b.submitted("cpus", 1, account="lab/team", cpus=16),
        b.plan(("cpus", "n1", [0])),
        msgspec.structs.replace(start, meta=b.meta(0)),
    )
    now = 10 * 60 * 10**9
    [due] = charges_due(state, now, interval_ns=1)
    assert due.gpu_ms == 8 * 10 * MINUTE_MS
    assert promised(state, now) == {"lab": due.gpu_ms}


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
        ({"gpu_hours": 1e308}, "gpu_hours"),
        ({"gpu_hours": float("inf")}, "gpu_hours"),
        ({"gpu_hours": float("nan")}, "gpu_hours"),
        ({"gpu_hours": 2.0**64}, "gpu_hours"),
        ({"gpu_hours": 168_000_001, "period": "7d"}, "gpu_hours"),  # > a million GPUs' week
        ({"share": float("nan")}, "share"),
        ({"gpu_hours": 5, "period": "0s"}, "period"),
        ({"gpu_hours": 5, "period": "367d"}, "period"),
        ({"gpu_hours": 5, "period": "9" * 5000 + "d"}, "period"),
        # Above 0, yet less than the smallest amount a budget holds: granted, it would be 0.
        ({"gpu_hours": 1e-10}, "gpu_hours"),
        ({"share": 1e-9}, "share"),
        ({"share": 1e-5, "period": "1s"}, "share"),  # 8 GPUs for a second: 0.08 GPU-ms
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
    assert len(errors[0].value) <= 200


def test_the_largest_grant_is_a_million_gpus_for_the_whole_period() -> None:
    state = fold(AccountDefined(meta=b.meta(), path="lab", settings=AccountSettings()))
    request = BudgetGrantRequest(account="lab", gpu_hours=168_000_000, period="7d")
    assert read_grant(request, state) == ((168_000_000 * 3_600_000, WEEK, None), [])


def test_a_share_needs_nodes_to_have_a_size() -> None:
    _, errors = read_grant(BudgetGrantRequest(account="lab", share=0.5), State())
    assert "no nodes" in errors[0].message


def test_granting_again_does_not_refill_the_period() -> None:
    state = fold(b.node("n1", 1), grant("lab", 1_000), *charge("lab", 800, at=HOUR))  # type: ignore[arg-type]
    apply(state, state.seq + 1, grant("lab", 1_000, starts_at=2 * HOUR))
    assert state.budgets["lab"].left(2 * HOUR + 1) == 200
