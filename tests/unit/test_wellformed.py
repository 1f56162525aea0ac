"""Events no honest writer sends are refused by the fold before any rule sees them."""

import msgspec
import pytest

from allot.core import DEFAULT_POLICY, State, apply, plan
from allot.proto.events import (
    AccountDefined,
    AccountSettings,
    BudgetGranted,
    Event,
    GpuInfo,
    JobExited,
    NodeHealthChanged,
    UsageCharged,
)
from tests import builders as b


def forged() -> list[tuple[Event, str]]:
    node = b.node("n2", 2)
    return [
        (b.submitted("j", 0), "gpus='0'"),
        (b.submitted("j", 1, workers=0), "workers='0'"),
        (b.submitted("j", 1, cpus=2**63 - 1), "cpus="),
        (b.submitted("j", 1, command=[]), "command="),
        (b.submitted("j", 1, account="Not/A/Path"), "account="),
        (b.plan(b.admission("j1")), "admission of j1: no placements"),
        (b.plan(("j1", "n1", [-1])), "no such GPU index"),
        (msgspec.structs.replace(node, gpus=[node.gpus[0], node.gpus[0]]), "index listed twice"),
        (msgspec.structs.replace(node, nvlink_islands=[[0, 5]]), "nvlink_islands"),
        (
            msgspec.structs.replace(node, gpus=[GpuInfo(index=0, model="x", memory_mib=-1)]),
            "memory",
        ),
        (msgspec.structs.replace(node, cpus=-4), "cpus=-4"),
        (
            msgspec.structs.replace(
                node, gpus=[GpuInfo(index=0, model="x", memory_mib=1, uuid="G" * 129)]
            ),
            "uuid",
        ),
        (
            msgspec.structs.replace(
                node, gpus=[GpuInfo(index=0, model="x", memory_mib=1, parent=-1)]
            ),
            "parent=-1",
        ),
        (msgspec.structs.replace(node, problems=["p" * 2000]), "problems: at most"),
        (
            msgspec.structs.replace(b.started("j1", "n1", [0]), gpu_uuids=["GPU-a", "GPU-b"]),
            "gpu_uuids",
        ),
        (
            NodeHealthChanged(
                meta=b.meta(), node_id="n1", healthy=False, reason="x", gpu=5000, fault="xid"
            ),
            "gpu=5000",
        ),
        (
            BudgetGranted(meta=b.meta(), path="lab/team", gpu_ms=1, period_ns=0, starts_at=0),
            "period_ns=0",
        ),
        (
            BudgetGranted(meta=b.meta(), path="lab/team", gpu_ms=-1, period_ns=1, starts_at=0),
            "gpu_ms=-1",
        ),
        (
            UsageCharged(
                meta=b.meta(),
                path="lab/team",
                job_id="j1",
                attempt=0,
                from_ns=9,
                to_ns=1,
                gpu_ms=1,
            ),
            "to_ns=1",
        ),
        (
            AccountDefined(meta=b.meta(), path="lab", settings=AccountSettings(weight=0)),
            "weight=0",
        ),
        (
            JobExited(meta=b.meta(), job_id="j1", node_id="n1", exit_code=2**40, output_path="/o"),
            "exit_code",
        ),
        (msgspec.structs.replace(b.lost("n1"), meta=b.meta(at=-5)), "meta.at=-5"),
        (b.submitted("a.b", 1), "job_id='a.b'"),
        (
            BudgetGranted(meta=b.meta(), path="lab/team", gpu_ms=1, period_ns=5, starts_at=0),
            "period_ns=5",
        ),
        (
            UsageCharged(
                meta=b.meta(),
                path="lab/team",
                job_id="j1",
                attempt=0,
                from_ns=0,
                to_ns=2**62,
                gpu_ms=1,
            ),
            "to_ns=",
        ),
        (b.submitted("../..", 1), "job_id='../..'"),
        (b.node("rack1.node7", 1), "node_id='rack1.node7'"),
        (b.started("j" * 129, "n1", [0]), "at most 128"),
    ]


@pytest.mark.parametrize(("event", "says"), forged(), ids=lambda v: str(v)[:30])
def test_a_forged_event_is_ignored_with_its_field_and_changes_nothing(
    event: Event, says: str
) -> None:
    state = b.fold(b.node("n1", 8), b.submitted("j1", 1))
    before = (sorted(state.jobs), dict(state.nodes["n1"].allocated), dict(state.budgets))
    apply(state, state.seq + 1, event)
    [ignored] = state.ignored
    assert ignored.reason.startswith("malformed: ")
    assert says in ignored.reason
    assert (sorted(state.jobs), dict(state.nodes["n1"].allocated), dict(state.budgets)) == before
    plan(state, 10**12, DEFAULT_POLICY)  # and planning on what is left works


def test_the_state_after_refusals_plans_as_before() -> None:
    clean = b.fold(b.node("n1", 8), b.submitted("j1", 1))
    dirty = State()
    for seq, event in enumerate(
        [b.node("n1", 8), b.submitted("j0", 0), b.submitted("j1", 1)], start=1
    ):
        apply(dirty, seq, event)
    assert (
        plan(dirty, 10**12, DEFAULT_POLICY).admissions
        == plan(clean, 10**12, DEFAULT_POLICY).admissions
    )
