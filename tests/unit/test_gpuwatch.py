"""The agent's watch on its GPUs: heartbeats never wait on NVML, XIDs are kept until the
log has them, and NVML is shut only once nothing waits inside it."""

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from allot.services.node.app import Host, NodeAgent
from allot.services.node.gpuwatch import GpuWatch
from allot.services.node.nvml import Gpus
from allot.services.node.simnvml import FaultFile, SimulatedNvml, simulated_host
from tests import builders as b
from tests.builders import fold
from tests.unit.test_gpuhealth import unhealthy


async def until(check: Any, timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.02)


async def test_a_heartbeat_never_waits_on_nvml_and_says_when_it_stopped_answering() -> None:
    nvml = simulated_host("n1", 2, "SIM", 1024, [[0, 1]])
    stuck = threading.Event()
    answer = nvml.nvmlDeviceGetRemappedRows

    def hangs(handle: Any) -> Any:
        stuck.wait()
        return answer(handle)

    watch = GpuWatch(Gpus(nvml), simulated=True, poll_s=0.05, stale_s=0.3)
    await watch.open()
    try:
        await until(lambda: watch.read_at is not None)
        assert watch.faults() == []
        nvml.nvmlDeviceGetRemappedRows = hangs  # type: ignore[method-assign]
        nvml.inject_xid(0, 48)  # arrives while the conditions cannot be read
        began = time.monotonic()
        await until(lambda: any(f.kind == "xid" for f in watch.faults()))
        await until(lambda: any(f.gpu is None for f in watch.faults()))
        assert time.monotonic() - began < 3
        kinds = {(f.gpu, f.kind) for f in watch.faults()}
        assert kinds == {(0, "xid"), (None, "unanswered")}
        [silent] = [f for f in watch.faults() if f.gpu is None]
        assert silent.detail.startswith("NVML has not answered for ")
    finally:
        stuck.set()
        watch.close()


async def test_an_xid_is_sent_until_the_log_records_its_gpu_as_broken() -> None:
    nvml = simulated_host("n1", 4, "SIM", 1024, [[0, 1, 2, 3]])
    watch = GpuWatch(Gpus(nvml), simulated=True, poll_s=0.05)
    await watch.open()
    try:
        nvml.inject_xid(2, 79)
        nvml.inject_xid(1, 13)  # the application's own: never sent
        await until(lambda: watch.faults() != [])
        await asyncio.sleep(0.2)
        assert [(f.gpu, f.xid) for f in watch.faults()] == [(2, 79)]
        state = fold(b.node("n1", 4), unhealthy("n1", 2, "xid"))
        watch.acknowledge(state.nodes["n1"])  # broken, but not yet draining: kept
        assert [f.gpu for f in watch.faults()] == [2]
        state.nodes["n1"].draining = True
        watch.acknowledge(state.nodes["n1"])
        assert watch.faults() == []
    finally:
        watch.close()


class Watched(SimulatedNvml):
    """Simulated GPUs that note whether the event set is freed while a wait is inside."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.waiting = 0
        self.freed_while_waiting = False

    def nvmlEventSetWait_v2(self, events: object, timeout_ms: int) -> Any:  # noqa: N802
        self.waiting += 1
        try:
            return super().nvmlEventSetWait_v2(events, timeout_ms)
        finally:
            self.waiting -= 1

    def nvmlEventSetFree(self, events: object) -> None:  # noqa: N802
        self.freed_while_waiting |= self.waiting > 0
        super().nvmlEventSetFree(events)


async def test_nvml_is_shut_only_once_no_thread_waits_inside_it() -> None:
    nvml = Watched(simulated_host("n1", 2, "SIM", 1024, [[0, 1]]).gpus)
    watch = GpuWatch(Gpus(nvml), simulated=True, poll_s=0.05)
    await watch.open()
    await until(lambda: nvml.waiting > 0)
    watch.close()
    assert not nvml.freed_while_waiting
    assert not nvml.initialised


def test_a_real_host_never_shows_a_job_a_device_by_a_number(tmp_path: Any) -> None:
    """Where a placed device has no UUID (a placement older than a re-registration), the
    job is not started: CUDA's numbers are not NVML's, and a MIG slot is no number at all."""
    state = fold(b.node("n1", 2), b.submitted("j", 2), b.plan(("j", "n1", [0, 1])))
    real = NodeAgent(
        None,  # type: ignore[arg-type]  (no log is needed to say what a job is shown)
        "n1",
        Host(),
        GpuWatch(Gpus(SimulatedNvml([])), simulated=False),
        tmp_path,
    )
    real.state = state
    real._uuids = {0: "GPU-a", 1: "GPU-b"}
    env = real._job_env(state.jobs["j"])
    assert (env["CUDA_VISIBLE_DEVICES"], env["ALLOT_GPU_INDICES"]) == ("GPU-a,GPU-b", "0,1")
    real._uuids = {0: "GPU-a"}
    with pytest.raises(ValueError, match=r"no device \[1\]"):
        real._job_env(state.jobs["j"])


async def test_an_xid_in_the_fault_file_before_the_agent_starts_is_not_lost(
    tmp_path: Path,
) -> None:
    nvml = simulated_host("n1", 2, "SIM", 1024, [[0, 1]])
    lines = tmp_path / "faults.jsonl"
    lines.write_text('{"gpu": 1, "xid": 79}\n')
    watch = GpuWatch(Gpus(nvml), simulated=True, fault_file=FaultFile(lines, nvml), poll_s=0.01)
    await watch.open()
    try:
        await until(lambda: [(f.gpu, f.xid) for f in watch.faults()] == [(1, 79)])
    finally:
        watch.close()


async def test_the_first_heartbeat_carries_a_first_reading() -> None:
    nvml = simulated_host("n1", 2, "SIM", 1024, [[0, 1]])
    nvml.gpus[0].row_remap_pending = True
    watch = GpuWatch(Gpus(nvml), simulated=True, poll_s=0.5)
    await watch.open()
    try:
        assert [f.kind for f in watch.faults()] == ["row_remap_pending"]
    finally:
        watch.close()


async def test_samples_of_a_silent_nvml_are_not_sent_as_fresh() -> None:
    nvml = simulated_host("n1", 1, "SIM", 1024, [[0]])
    nvml.gpus[0].utilization = 97
    stuck = threading.Event()
    answer = nvml.nvmlDeviceGetRemappedRows
    watch = GpuWatch(Gpus(nvml), simulated=True, poll_s=0.05, sample_s=0.05, stale_s=0.3)
    await watch.open()
    try:
        assert [s.utilization for s in watch.samples()] == [97]
        nvml.nvmlDeviceGetRemappedRows = lambda h: stuck.wait() or answer(h)  # type: ignore[method-assign]
        await until(lambda: watch.samples() == [])
    finally:
        stuck.set()
        watch.close()


def test_a_slow_heartbeat_is_not_silence() -> None:
    watch = GpuWatch(Gpus(SimulatedNvml([])), simulated=True, poll_s=60)
    assert watch.stale_s >= 3 * 60


async def test_a_watch_that_cannot_start_leaves_no_thread_behind() -> None:
    nvml = simulated_host("n1", 1, "SIM", 1024, [[0]])

    def fails() -> None:
        raise RuntimeError("no events today")

    nvml.nvmlEventSetCreate = fails  # type: ignore[assignment,method-assign]
    with pytest.raises(RuntimeError):
        await GpuWatch(Gpus(nvml), simulated=True, poll_s=0.01).open()
    assert [t.name for t in threading.enumerate() if t.name.startswith("allot-gpu")] == []
    assert not nvml.initialised
