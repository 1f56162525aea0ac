"""The NVML inventory, health and samples, driven through simulated GPUs that answer
pynvml's function surface (and raise its errors)."""

import asyncio
from pathlib import Path

import msgspec
import pynvml
import pytest

from allot.core.gpuhealth import counts, host_suspect
from allot.proto.telemetry import GpuFault, Heartbeat, decode_heartbeat
from allot.services.node.gpuwatch import GpuWatch
from allot.services.node.nvml import Gpus, Unavailable
from allot.services.node.simnvml import FaultFile, SimGpu, SimMig, SimulatedNvml, simulated_host
from tests.nvml import failing, nvml_loads

H100 = "NVIDIA H100 80GB HBM3"


def gpu(index: int, *, links: list[str] | None = None, **fields: object) -> SimGpu:
    return SimGpu(
        name=H100,
        memory_mib=81559,
        uuid=f"GPU-{index:04d}",
        bus_id=f"00000000:{0x18 + index:02X}:00.0",
        links=links or [],
        **fields,  # type: ignore[arg-type]
    )


def opened(gpus: list[SimGpu]) -> Gpus:
    found = Gpus(SimulatedNvml(gpus))
    found.open()
    return found


def test_two_nvswitch_islands_and_direct_links_are_found_from_the_links_far_ends() -> None:
    switch_a, switch_b = "00000000:C0:00.0", "00000000:C1:00.0"
    gpus = [gpu(i, links=[switch_a, switch_a]) for i in range(4)]
    gpus += [gpu(i, links=[switch_b]) for i in range(4, 8)]
    # Two more joined by a bridge (each names the other), and one with no NVLink at all.
    gpus += [gpu(8, links=[gpus_bus(9)]), gpu(9, links=[gpus_bus(8)]), gpu(10)]
    inventory = opened(gpus).inventory()
    assert inventory.nvlink_islands == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9], [10]]
    assert [g.index for g in inventory.gpus] == list(range(11))
    first = inventory.gpus[0]
    assert (first.model, first.memory_mib, first.uuid) == (H100, 81559, "GPU-0000")
    assert first.pci_bus_id == "00000000:18:00.0".lower()
    assert first.parent is None
    assert inventory.problems == []


def gpus_bus(index: int) -> str:
    return f"00000000:{0x18 + index:02X}:00.0"


def mig(count: int, first: int = 0, profile: str = f"{H100} MIG 1g.10gb") -> list[SimMig]:
    return [
        SimMig(name=profile, memory_mib=9856, uuid=f"MIG-{first + n}", gpu_instance_id=7 + n)
        for n in range(count)
    ]


def test_mig_instances_are_devices_of_their_own_after_the_last_gpu() -> None:
    profile = f"{H100} MIG 1g.10gb"
    inventory = opened([gpu(0, mig=mig(2)), gpu(1, mig=mig(2, first=2))]).inventory()
    assert [(g.index, g.model, g.uuid, g.parent) for g in inventory.gpus] == [
        (2, profile, "MIG-0", 0),
        (3, profile, "MIG-1", 0),
        (4, profile, "MIG-2", 1),
        (5, profile, "MIG-3", 1),
    ]
    assert all(g.memory_mib == 9856 for g in inventory.gpus)
    assert inventory.nvlink_islands == []  # a MIG instance shares NVLink with nothing
    assert inventory.problems == []


def test_a_host_of_mixed_devices_offers_only_the_model_it_has_most_of() -> None:
    """A job that asks for a whole GPU must never be placed on a MIG slice."""
    found = opened([gpu(0, mig=mig(3)), gpu(1), gpu(2)])
    inventory = found.inventory()
    assert [(g.index, g.parent) for g in inventory.gpus] == [(3, 0), (4, 0), (5, 0)]
    assert inventory.problems == [
        f"devices [1, 2] ({H100}) are not offered: a node offers one model, "
        f"here {H100} MIG 1g.10gb; partition its GPUs alike"
    ]
    assert [s.gpu for s in found.samples()] == [3, 4, 5]
    tie = opened([gpu(0, mig=mig(1)), gpu(1)]).inventory()
    assert [(g.index, g.model) for g in tie.gpus] == [(1, H100)]  # whole GPUs win a tie


def test_a_lost_gpu_that_is_not_offered_is_a_fault_of_the_host() -> None:
    gpus = [gpu(0, mig=mig(1)), gpu(1), gpu(2)]
    found = opened(gpus)
    found.inventory()
    gpus[0].lost = True
    [fault] = found.faults()
    assert (fault.gpu, fault.kind) == (None, "gpu_lost")
    assert fault.detail.startswith("GPU 0: ")


def test_a_gpu_in_mig_mode_without_instances_is_reported_not_offered() -> None:
    inventory = opened([gpu(0, mig=[]), gpu(1)]).inventory()
    assert [g.index for g in inventory.gpus] == [1]
    assert inventory.problems == ["GPU 0 is in MIG mode with no instances: nothing to offer"]


def test_features_a_gpu_lacks_are_unknowns_never_faults_or_zeros() -> None:
    lacking = {
        "nvmlDeviceGetNvLinkState",
        "nvmlDeviceGetMigMode",
        "nvmlDeviceGetTotalEccErrors",
        "nvmlDeviceGetRetiredPagesPendingStatus",
        "nvmlDeviceGetRemappedRows",
        "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlDeviceGetPowerUsage",
        "nvmlDeviceGetUtilizationRates",
    }
    found = opened([gpu(0, links=["00000000:C0:00.0"], unsupported=lacking, temperature_c=51)])
    inventory = found.inventory()
    assert [g.index for g in inventory.gpus] == [0]
    assert inventory.nvlink_islands == [[0]]
    assert found.faults() == []
    [sample] = found.samples()
    assert (sample.utilization, sample.power_w, sample.temperature_c) == (None, None, 51)
    assert sample.memory_used_mib == 0


def test_a_gpu_that_answers_nothing_is_reported_and_the_others_are_offered() -> None:
    broken = gpu(1, unsupported={"nvmlDeviceGetName", "nvmlDeviceGetUUID"})
    found = opened([gpu(0), broken, gpu(2, lost=True)])
    inventory = found.inventory()
    assert [g.index for g in inventory.gpus] == [0]
    assert inventory.problems == [
        "GPU 1 answers nothing: no UUID, name or memory size",
        "GPU 2 answers nothing: GPU is lost",
    ]
    faults = found.faults()
    assert [(f.gpu, f.kind) for f in faults] == [(None, "unanswered"), (None, "unanswered")]
    assert "GPU 2" in faults[1].detail


def test_conditions_are_read_afresh_each_time() -> None:
    gpus = [gpu(0), gpu(1), gpu(2), gpu(3)]
    found = opened(gpus)
    found.inventory()
    assert found.faults() == []
    gpus[1].ecc_uncorrected = 2  # the counter rises
    gpus[2].row_remap_pending = True
    gpus[3].clocks_event_reasons = pynvml.nvmlClocksEventReasonHwThermalSlowdown
    assert [(f.gpu, f.kind) for f in found.faults()] == [
        (1, "ecc_uncorrected"),
        (2, "row_remap_pending"),
        (3, "thermal_slowdown"),
    ]
    assert "2 uncorrected ECC errors" in found.faults()[0].detail
    gpus[3].clocks_event_reasons = 0
    gpus[2].row_remap_pending, gpus[2].row_remap_failed = False, True
    assert [(f.gpu, f.kind) for f in found.faults()] == [
        (1, "ecc_uncorrected"),
        (2, "row_remap_failed"),
    ]


def test_a_gpu_lost_after_the_inventory_is_a_fault_of_each_of_its_devices() -> None:
    gpus = [gpu(0, mig=mig(2)), gpu(1, mig=mig(2, first=2))]
    found = opened(gpus)
    found.inventory()
    gpus[1].lost = True
    assert [(f.gpu, f.kind) for f in found.faults()] == [(4, "gpu_lost"), (5, "gpu_lost")]
    [healthy, _, first, second] = found.samples()
    assert healthy.temperature_c == 35
    assert first.temperature_c is None
    assert second.temperature_c is None


def test_an_xid_arriving_while_a_job_runs_names_its_device() -> None:
    nvml = SimulatedNvml([gpu(0), gpu(1)])
    found = Gpus(nvml)
    found.open()
    found.inventory()
    found.watch_events()
    assert found.wait_event(10) == []  # nothing yet: the wait times out
    nvml.inject_xid(1, 79)
    [fault] = found.wait_event(1000)
    assert fault == GpuFault(gpu=1, kind="xid", detail="XID 79", xid=79)
    nvml.inject_xid(0, 13)  # the application's own error
    [own] = found.wait_event(1000)
    assert not counts(own)


def test_an_xid_of_a_mig_instance_names_that_instance_only() -> None:
    instances = [SimMig(name="m", memory_mib=1, uuid=f"MIG-{n}", gpu_instance_id=n) for n in (1, 2)]
    nvml = SimulatedNvml([gpu(0, mig=instances)])
    found = Gpus(nvml)
    found.open()
    found.inventory()
    found.watch_events()
    nvml.inject_xid(0, 48, gpu_instance_id=2)
    assert [f.gpu for f in found.wait_event(1000)] == [2]
    nvml.inject_xid(0, 79)  # the whole GPU: each of its instances
    assert [f.gpu for f in found.wait_event(1000)] == [1, 2]


def test_a_simulated_host_has_stable_uuids_and_the_islands_it_was_given() -> None:
    first = Gpus(simulated_host("n1", 8, "SIM-H100", 1024, [[0, 1, 2, 3], [4, 5], [6], [7]]))
    again = Gpus(simulated_host("n1", 8, "SIM-H100", 1024, [[0, 1, 2, 3], [4, 5], [6], [7]]))
    other = Gpus(simulated_host("n2", 8, "SIM-H100", 1024, [list(range(8))]))
    for found in (first, again, other):
        found.open()
    inventory = first.inventory()
    assert inventory.nvlink_islands == [[0, 1, 2, 3], [4, 5], [6], [7]]
    assert [g.uuid for g in inventory.gpus] == [g.uuid for g in again.inventory().gpus]
    assert {g.uuid for g in inventory.gpus}.isdisjoint(g.uuid for g in other.inventory().gpus)
    assert other.inventory().nvlink_islands == [list(range(8))]


def test_without_nvml_the_host_is_said_to_have_none() -> None:
    """On a machine without the NVIDIA driver the real pynvml cannot load its library;
    on a GPU host it reads the real inventory."""
    found = Gpus(pynvml)
    if not nvml_loads():
        with pytest.raises(Unavailable, match="NVML cannot be used on this host"):
            found.open()
        return
    found.open()
    try:
        assert all(g.uuid for g in found.inventory().gpus)
    finally:
        found.close()


def test_a_failure_of_nvml_itself_is_unavailable_not_a_traceback() -> None:
    nvml = SimulatedNvml([])

    nvml.nvmlInit = failing(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)  # type: ignore[method-assign]
    with pytest.raises(Unavailable, match="Driver Not Loaded"):
        Gpus(nvml).open()


# --- what a review found ------------------------------------------------------------------


def test_a_passing_nvml_error_is_the_gpus_not_a_lost_host() -> None:
    """A timeout of one query is not a GPU off the bus: it must not drain the node."""
    gpus = [gpu(0), gpu(1)]
    nvml = SimulatedNvml(gpus)
    found = Gpus(nvml)
    found.open()
    found.inventory()

    nvml.nvmlDeviceGetRemappedRows = failing(pynvml.NVML_ERROR_TIMEOUT)  # type: ignore[method-assign]
    faults = found.faults()
    assert [(f.gpu, f.kind) for f in faults] == [(0, "unanswered"), (1, "unanswered")]
    assert not any(host_suspect(f) for f in faults)
    gpus[1].lost = True
    assert host_suspect(found.faults()[1])  # a GPU that is lost is


def test_the_xid_of_a_gpu_that_fell_off_the_bus_is_not_dropped() -> None:
    gpus = [gpu(0), gpu(1)]
    nvml = SimulatedNvml(gpus)
    found = Gpus(nvml)
    found.open()
    found.inventory()
    found.watch_events()
    gpus[1].lost = True  # every call about it now fails, its UUID's too
    nvml.inject_xid(1, 79)
    assert [(f.gpu, f.xid) for f in found.wait_event(1000)] == [(1, 79)]


def test_gpus_without_pci_info_are_islands_of_their_own_and_bus_ids_match_in_any_form() -> None:
    nameless = {"nvmlDeviceGetPciInfo"}
    inventory = opened([gpu(0, unsupported=nameless), gpu(1, unsupported=nameless)]).inventory()
    assert inventory.nvlink_islands == [[0], [1]]
    # A far end written with a short domain and in upper case is the same GPU.
    linked = [gpu(0, links=["0000:19:00.0"]), gpu(1)]
    assert opened(linked).inventory().nvlink_islands == [[0, 1]]


def test_nvml_that_fails_to_count_is_unavailable_and_no_event_set_means_no_xids() -> None:
    nvml = SimulatedNvml([gpu(0)])

    nvml.nvmlDeviceGetCount = failing(pynvml.NVML_ERROR_UNKNOWN)  # type: ignore[method-assign]
    with pytest.raises(Unavailable, match="Unknown Error"):
        asyncio.run(GpuWatch(Gpus(nvml), simulated=False).open())
    nvml = SimulatedNvml([gpu(0)])

    nvml.nvmlEventSetCreate = failing(pynvml.NVML_ERROR_NOT_SUPPORTED)  # type: ignore[method-assign]
    watch = GpuWatch(Gpus(nvml), simulated=False)
    inventory = asyncio.run(watch.open())
    assert [g.index for g in inventory.gpus] == [0]
    watch.close()


def test_faults_sent_are_faults_the_receiver_takes() -> None:
    nvml = SimulatedNvml([gpu(0)])
    found = Gpus(nvml)
    found.open()
    found.inventory()

    nvml.nvmlDeviceGetRemappedRows = failing(pynvml.NVML_ERROR_UNKNOWN)  # type: ignore[method-assign]
    pynvml.NVMLError._errcode_to_string[pynvml.NVML_ERROR_UNKNOWN] = "x" * 1000
    try:
        faults = found.faults()
    finally:
        pynvml.NVMLError._errcode_to_string[pynvml.NVML_ERROR_UNKNOWN] = "Unknown Error"
    beat = Heartbeat(node_id="n1", at=0, running=0, faults=faults)
    assert decode_heartbeat(msgspec.json.encode(beat)) == beat


def test_a_fault_file_line_out_of_bounds_is_refused_not_sent(tmp_path: Path) -> None:
    nvml = SimulatedNvml([gpu(0)])
    lines = tmp_path / "faults.jsonl"
    lines.write_text('{"gpu": 0, "xid": 4294967296}\n{"gpu": -1, "xid": 79}\n')
    problems = FaultFile(lines, nvml).apply_new()
    assert len(problems) == 2
    assert "xid" in problems[0]
    assert nvml._events.empty()


def test_a_truncated_fault_file_is_read_again_from_its_start(tmp_path: Path) -> None:
    nvml = SimulatedNvml([gpu(0)])
    lines = tmp_path / "faults.jsonl"
    lines.write_text('{"gpu": 0, "ecc_uncorrected": 1}\n' * 3)
    faults = FaultFile(lines, nvml)
    assert faults.apply_new() == []
    lines.write_text('{"gpu": 0, "ecc_uncorrected": 5}\n')
    assert faults.apply_new() == []
    assert nvml.gpus[0].ecc_uncorrected == 5


def test_a_big_simulated_host_keeps_its_islands() -> None:
    found = Gpus(simulated_host("n1", 200, "SIM", 1024, [list(range(100)), list(range(100, 200))]))
    found.open()
    assert found.inventory().nvlink_islands == [list(range(100)), list(range(100, 200))]


def test_old_drivers_report_slowdowns_through_the_old_function() -> None:
    nvml = SimulatedNvml([gpu(0, unsupported={"nvmlDeviceGetCurrentClocksEventReasons"})])
    nvml.gpus[0].clocks_event_reasons = pynvml.nvmlClocksThrottleReasonHwThermalSlowdown
    found = Gpus(nvml)
    found.open()
    found.inventory()
    assert [f.kind for f in found.faults()] == ["thermal_slowdown"]


def test_an_xid_of_a_gpu_that_is_not_offered_is_the_hosts_when_it_says_so() -> None:
    nvml = SimulatedNvml([gpu(0, mig=mig(2)), gpu(1, mig=mig(2, first=2)), gpu(2)])
    found = Gpus(nvml)
    found.open()
    assert [g.index for g in found.inventory().gpus] == [3, 4, 5, 6]  # GPU 2 is not offered
    found.watch_events()
    nvml.inject_xid(2, 79)
    assert [(f.gpu, f.xid) for f in found.wait_event(1000)] == [(None, 79)]
    nvml.inject_xid(2, 48)  # says nothing of the host: of no device offered, so of nothing
    assert found.wait_event(1000) == []
