"""What a heartbeat's GPU faults turn into: transitions of the log, and drains."""

import msgspec

from allot.core import DEFAULT_POLICY, State, apply, plan
from allot.core.gpuhealth import Change, host_suspect, judge
from allot.core.model import GpuFaultRecord
from allot.proto.events import (
    Admission,
    GpuInfo,
    NodeCordoned,
    NodeHealthChanged,
    NodeUncordoned,
    Placement,
)
from allot.proto.telemetry import GpuFault
from tests import builders as b
from tests.builders import fold

S = 10**9
XID_79 = GpuFault(gpu=2, kind="xid", detail="XID 79", xid=79)
HOT = GpuFault(gpu=1, kind="thermal_slowdown", detail="clocks slowed")


def unhealthy(node: str, gpu: int | None, fault: str, at: int = 1_000) -> NodeHealthChanged:
    return NodeHealthChanged(
        meta=b.meta(at), node_id=node, healthy=False, reason=fault, gpu=gpu, fault=fault
    )  # type: ignore[arg-type]


def record(state: State, node: str, changes: list[Change]) -> None:
    for change in changes:
        apply(
            state,
            state.seq + 1,
            NodeHealthChanged(
                meta=b.meta(),
                node_id=node,
                healthy=change.healthy,
                reason=change.reason,
                gpu=change.gpu,
                fault=change.fault,  # type: ignore[arg-type]
            ),
        )


def test_a_fault_turns_its_gpu_unhealthy_once_and_a_suspect_host_is_drained() -> None:
    state = fold(b.node("n1", 4))
    node = state.nodes["n1"]
    first = judge(node, [XID_79], now=0, clear_since={})
    assert first.changes == [
        Change(
            gpu=2,
            healthy=False,
            reason="XID 79 (the GPU has fallen off the bus)",
            fault="xid",
        )
    ]
    assert first.cordon == "GPU 2: XID 79 (the GPU has fallen off the bus)"
    record(state, "n1", first.changes)
    apply(state, state.seq + 1, NodeCordoned(meta=b.meta(), node_id="n1", drain=True))
    again = judge(node, [XID_79], now=S, clear_since={})
    assert again.changes == []
    assert again.cordon is None


def test_a_gpu_level_fault_does_not_cordon_the_host() -> None:
    node = fold(b.node("n1", 4)).nodes["n1"]
    ecc = GpuFault(gpu=0, kind="ecc_uncorrected", detail="3 uncorrected ECC errors")
    judgment = judge(node, [ecc, HOT], now=0, clear_since={})
    assert [(c.gpu, c.fault) for c in judgment.changes] == [
        (0, "ecc_uncorrected"),
        (1, "thermal_slowdown"),
    ]
    assert judgment.cordon is None


def test_a_passing_condition_recovers_only_after_it_was_gone_for_the_recovery_time() -> None:
    state = fold(b.node("n1", 4))
    node = state.nodes["n1"]
    record(state, "n1", judge(node, [HOT], now=0, clear_since={}).changes)
    assert 1 in node.gpu_faults
    quiet = judge(node, [], now=10 * S, clear_since={}, recover_ns=60 * S)
    assert quiet.changes == []
    assert quiet.clear_since == {1: 10 * S}
    back = judge(node, [HOT], now=20 * S, clear_since=quiet.clear_since, recover_ns=60 * S)
    assert back.changes == []
    assert back.clear_since == {}
    quiet = judge(node, [], now=30 * S, clear_since=back.clear_since, recover_ns=60 * S)
    later = judge(node, [], now=89 * S, clear_since=quiet.clear_since, recover_ns=60 * S)
    assert later.changes == []
    done = judge(node, [], now=90 * S, clear_since=later.clear_since, recover_ns=60 * S)
    assert done.changes == [Change(gpu=1, healthy=True, reason="thermal slowdown no longer seen")]
    record(state, "n1", done.changes)
    assert node.gpu_faults == {}


def test_a_broken_gpu_stays_unhealthy_until_an_operator_uncordons_its_node() -> None:
    state = fold(b.node("n1", 4))
    node = state.nodes["n1"]
    record(state, "n1", judge(node, [XID_79], now=0, clear_since={}).changes)
    # A restarted agent no longer reports the XID: the log still remembers it.
    assert judge(node, [], now=3600 * S, clear_since={}, recover_ns=S).changes == []
    apply(state, state.seq + 1, NodeUncordoned(meta=b.meta(), node_id="n1"))
    assert node.gpu_faults == {}
    assert node.healthy
    assert node.free_gpus() == [0, 1, 2, 3]


def test_a_condition_that_turns_out_a_breakage_is_recorded_as_one() -> None:
    state = fold(b.node("n1", 4))
    node = state.nodes["n1"]
    slow = GpuFault(gpu=2, kind="power_slowdown", detail="power brake")
    record(state, "n1", judge(node, [slow], now=0, clear_since={}).changes)
    judgment = judge(node, [slow, XID_79], now=S, clear_since={})
    assert [(c.gpu, c.fault) for c in judgment.changes] == [(2, "xid")]
    record(state, "n1", judgment.changes)
    assert node.gpu_faults[2].kind == "xid"


def test_what_says_nothing_of_the_hardware_is_ignored() -> None:
    node = fold(b.node("n1", 4)).nodes["n1"]
    own_error = GpuFault(gpu=0, kind="xid", detail="XID 13", xid=13)
    elsewhere = GpuFault(gpu=9, kind="xid", detail="XID 79", xid=79)  # not a GPU of n1
    judgment = judge(node, [own_error, elsewhere], now=0, clear_since={})
    assert judgment.changes == []
    assert judgment.cordon is None


def test_a_host_fault_makes_the_node_unhealthy_and_suspect() -> None:
    state = fold(b.node("n1", 4))
    node = state.nodes["n1"]
    lost = GpuFault(gpu=None, kind="unanswered", detail="GPU 3: GPU is lost")
    judgment = judge(node, [lost], now=0, clear_since={})
    assert judgment.changes == [
        Change(gpu=None, healthy=False, reason="GPU 3: GPU is lost", fault="unanswered")
    ]
    assert judgment.cordon == "the host: GPU 3: GPU is lost"
    record(state, "n1", judgment.changes)
    assert not node.healthy
    assert not node.schedulable
    assert node.fault is not None
    assert node.fault.kind == "unanswered"


def test_no_work_is_placed_on_an_unhealthy_gpu() -> None:
    state = fold(
        b.node("n1", 4, islands=[[0, 1], [2, 3]]),
        unhealthy("n1", 1, "xid"),
        b.submitted("four", 4, at=1_000),
        b.submitted("pair", 2, topology="nvlink", at=2_000),
        b.submitted("one", 1, at=3_000),
    )
    decided = plan(state, 10_000, DEFAULT_POLICY)
    placed = {a.job_id: a.placements[0].gpus for a in decided.admissions}
    assert placed == {"pair": [2, 3], "one": [0]}
    assert state.nodes["n1"].free_gpus() == [0, 2, 3]


def test_a_job_on_a_gpu_that_fails_frees_only_the_healthy_gpus_when_it_ends() -> None:
    state = fold(
        b.node("n1", 2),
        b.submitted("a", 2),
        b.plan(("a", "n1", [0, 1])),
        b.started("a", "n1", [0, 1]),
        unhealthy("n1", 0, "xid"),
        b.exited("a", "n1", 1),
        b.submitted("next", 2, at=5_000),
        b.submitted("small", 1, at=6_000),
    )
    decided = plan(state, 10_000, DEFAULT_POLICY)
    assert [(a.job_id, a.placements[0].gpus) for a in decided.admissions] == [("small", [1])]


def test_a_suspect_host_drains_each_job_as_it_passes_its_minimum_runtime() -> None:
    hour = 3600 * S
    funded = Admission(job_id="a", placements=[Placement(node_id="n1", gpus=[0, 1])], funded=True)
    state = fold(
        b.node("n1", 4),
        b.submitted("a", 2, resumable=True, min_runtime_ns=hour, at=0),
        b.plan(funded),
        msgspec.structs.replace(b.started("a", "n1", [0, 1]), meta=b.meta(0)),
    )
    record(state, "n1", judge(state.nodes["n1"], [XID_79], now=S, clear_since={}).changes)
    apply(
        state,
        state.seq + 1,
        NodeCordoned(meta=b.meta(), node_id="n1", drain=True, reason="GPU 2", by="telemetry"),
    )
    assert plan(state, hour // 2, DEFAULT_POLICY).preemptions == []
    [stop] = plan(state, hour + S, DEFAULT_POLICY).preemptions
    assert (stop.job_id, stop.code) == ("a", "DRAIN")
    node = state.nodes["n1"]
    assert (node.cordon_reason, node.cordoned_by) == ("GPU 2", "telemetry")


def test_a_node_that_registers_other_devices_keeps_no_fault_of_the_old_ones() -> None:
    state = fold(
        b.node("n1", 8),
        unhealthy("n1", 6, "xid"),
        unhealthy("n1", 2, "xid"),
        unhealthy("n1", 1, "thermal_slowdown"),
    )
    node = state.nodes["n1"]
    changes = node.health_changes
    apply(state, state.seq + 1, b.node("n1", 4))  # GPUs 4-7 gone
    assert sorted(node.gpu_faults) == [1, 2]
    assert node.health_changes == changes + 1
    assert judge(node, [], now=10**15, clear_since={1: 0}).changes == [
        Change(gpu=1, healthy=True, reason="thermal slowdown no longer seen")
    ]
    # Another device at the same index (a GPU re-partitioned, a board replaced): its own
    # health, not its predecessor's.
    swapped = msgspec.structs.replace(
        b.node("n1", 4),
        gpus=[
            GpuInfo(index=i, model="SIM", memory_mib=1024, uuid=f"GPU-{'new' if i == 2 else i}")
            for i in range(4)
        ],
    )
    before = msgspec.structs.replace(
        swapped,
        gpus=[GpuInfo(index=i, model="SIM", memory_mib=1024, uuid=f"GPU-{i}") for i in range(4)],
    )
    state = fold(before, unhealthy("n1", 2, "xid"), unhealthy("n1", 3, "xid"))
    apply(state, state.seq + 1, swapped)
    assert sorted(state.nodes["n1"].gpu_faults) == [3]


def test_faults_of_devices_a_node_no_longer_has_are_never_judged() -> None:
    node = fold(b.node("n1", 2)).nodes["n1"]
    node.gpu_faults = {
        5: GpuFaultRecord(kind="thermal_slowdown", reason="hot", since=0)
    }  # as an older fold left it
    assert judge(node, [], now=10**15, clear_since={5: 0}).changes == []


def test_only_a_lost_gpu_or_one_the_host_cannot_read_makes_the_host_suspect() -> None:
    assert host_suspect(GpuFault(gpu=None, kind="unanswered", detail="GPU 3 answers nothing"))
    assert host_suspect(GpuFault(gpu=1, kind="gpu_lost", detail="lost"))
    assert not host_suspect(GpuFault(gpu=1, kind="unanswered", detail="a query timed out"))


def test_mig_instances_are_placed_as_the_gpus_of_their_profile() -> None:
    profile = "NVIDIA A100-SXM4-80GB MIG 1g.10gb"
    mig = msgspec.structs.replace(
        b.node("mig-1"),
        gpus=[
            GpuInfo(index=8 + n, model=profile, memory_mib=9856, uuid=f"MIG-{n}", parent=n // 7)
            for n in range(14)
        ],
        nvlink_islands=[],  # an instance shares NVLink with nothing
    )
    state = fold(
        mig,
        b.node("whole-1", 2, model="NVIDIA A100-SXM4-80GB"),
        unhealthy("mig-1", 9, "xid"),
        b.submitted("small", 2, flavor=profile, topology="node", at=1_000),
        b.submitted("big", 2, flavor="NVIDIA A100-SXM4-80GB", at=2_000),
        b.submitted("pair", 2, flavor=profile, topology="nvlink", at=3_000),
    )
    decided = plan(state, 10_000, DEFAULT_POLICY)
    placed = {a.job_id: (a.placements[0].node_id, a.placements[0].gpus) for a in decided.admissions}
    assert placed == {"small": ("mig-1", [8, 10]), "big": ("whole-1", [0, 1])}
    [waiting] = [p for p in decided.pending if p.job_id == "pair"]
    # Two instances never share an NVLink island: it waits for a block that cannot be.
    assert (waiting.code, waiting.params) == ("NO_BLOCK", {"need": 2, "topology": "nvlink"})
