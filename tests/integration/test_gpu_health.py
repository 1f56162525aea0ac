"""A node agent with simulated GPUs and the telemetry service against a real NATS server:
what comes out of the log when a GPU throws an XID mid-job, when its ECC counter rises,
and when heartbeats are malformed or forged."""

import asyncio
import json
from pathlib import Path

import msgspec

from allot.bus import EmbeddedNats, EventLog
from allot.core import State, apply_record
from allot.proto.events import (
    Event,
    JobStarted,
    NodeCordoned,
    NodeHealthChanged,
    NodeRegistered,
)
from allot.proto.subjects import heartbeat
from allot.proto.telemetry import GpuFault, Heartbeat
from allot.services.node.app import Host, NodeAgent
from allot.services.node.gpuwatch import GpuWatch
from allot.services.node.nvml import Gpus
from allot.services.node.simnvml import simulated_host
from allot.services.telemetry.app import Telemetry
from tests import builders as b
from tests.aio import background
from tests.stack import python


async def events_of(log: EventLog, kind: type[Event]) -> list[Event]:
    return [r.event for r in await log.read() if isinstance(r.event, kind)]


async def state_of(log: EventLog) -> State:
    state = State()
    for record in await log.read():
        apply_record(state, record)
    return state


async def eventually(log: EventLog, kind: type[Event], count: int = 1) -> list[Event]:
    async with asyncio.timeout(15):
        while len(found := await events_of(log, kind)) < count:
            await asyncio.sleep(0.05)
    return found


async def test_an_xid_mid_job_marks_its_gpu_and_drains_the_host_once(
    nats_server: EmbeddedNats, event_log: EventLog, tmp_path: Path
) -> None:
    nvml = simulated_host("n1", 4, "SIM-H100", 1024, [[0, 1, 2, 3]])
    agent_log = await EventLog.connect(nats_server.url)
    telemetry_log = await EventLog.connect(nats_server.url)
    agent = NodeAgent(
        agent_log, "n1", Host(cpus=8), GpuWatch(Gpus(nvml), simulated=True), tmp_path, 0.1
    )
    telemetry = Telemetry(telemetry_log, node_timeout_s=30, recover_s=0.5)
    try:
        async with background(agent.run(), telemetry.run()):
            [registered] = await eventually(event_log, NodeRegistered)
            assert isinstance(registered, NodeRegistered)
            assert not registered.problems
            uuids = [g.uuid for g in registered.gpus]
            await event_log.append(
                b.submitted("train", 2, command=python("import time; time.sleep(30)"))
            )
            await event_log.append(b.plan(("train", "n1", [1, 2])))
            [started] = await eventually(event_log, JobStarted)
            assert isinstance(started, JobStarted)
            assert started.gpu_uuids == [uuids[1], uuids[2]]

            nvml.inject_xid(2, 79)  # fell off the bus while the job ran on it
            [down] = await eventually(event_log, NodeHealthChanged)
            [cordon] = await eventually(event_log, NodeCordoned)
            assert isinstance(down, NodeHealthChanged)
            assert (down.node_id, down.gpu, down.healthy, down.fault) == ("n1", 2, False, "xid")
            assert "XID 79" in down.reason
            assert isinstance(cordon, NodeCordoned)
            assert (cordon.drain, cordon.now, cordon.by) == (True, False, "telemetry")
            assert cordon.reason.startswith("GPU 2: XID 79")

            nvml.gpus[0].ecc_uncorrected = 1  # the counter rises on another GPU
            await eventually(event_log, NodeHealthChanged, 2)
            await asyncio.sleep(1.5)  # heartbeats go on saying the same
    finally:
        await agent_log.close()
        await telemetry_log.close()
    changes = await events_of(event_log, NodeHealthChanged)
    assert [(e.gpu, e.fault) for e in changes] == [(2, "xid"), (0, "ecc_uncorrected")]  # type: ignore[attr-defined]
    assert len(await events_of(event_log, NodeCordoned)) == 1
    node = (await state_of(event_log)).nodes["n1"]
    assert sorted(node.gpu_faults) == [0, 2]
    assert node.draining


async def test_a_passing_slowdown_is_recorded_and_cleared(
    nats_server: EmbeddedNats, event_log: EventLog, tmp_path: Path
) -> None:
    telemetry_log = await EventLog.connect(nats_server.url)
    telemetry = Telemetry(telemetry_log, node_timeout_s=30, recover_s=0.3)
    await event_log.append(b.node("n1", 2))
    hot = GpuFault(gpu=1, kind="thermal_slowdown", detail="clocks slowed")

    async def beat(faults: list[GpuFault]) -> None:
        body = Heartbeat(node_id="n1", at=0, running=0, faults=faults)
        await event_log.nc.publish(heartbeat("n1"), msgspec.json.encode(body))

    try:
        async with background(telemetry.run()):
            await asyncio.sleep(0.3)
            await beat([hot])
            await eventually(event_log, NodeHealthChanged)
            for _ in range(10):
                await beat([])
                await asyncio.sleep(0.2)
            await eventually(event_log, NodeHealthChanged, 2)
    finally:
        await telemetry_log.close()
    changes = await events_of(event_log, NodeHealthChanged)
    assert [(e.gpu, e.healthy) for e in changes] == [(1, False), (1, True)]  # type: ignore[attr-defined]
    assert await events_of(event_log, NodeCordoned) == []


def beat_of(fault: dict[str, object]) -> bytes:
    return json.dumps({"node_id": "n1", "at": 0, "running": 0, "faults": [fault]}).encode()


async def test_malformed_and_forged_heartbeats_change_nothing_and_stop_nothing(
    nats_server: EmbeddedNats, event_log: EventLog
) -> None:
    telemetry_log = await EventLog.connect(nats_server.url)
    telemetry = Telemetry(telemetry_log, node_timeout_s=30, recover_s=0.1)
    await event_log.append(b.node("n1", 2))
    await event_log.append(b.node("n2", 2))
    xid = GpuFault(gpu=0, kind="xid", detail="XID 79", xid=79)
    other = GpuFault(gpu=1, kind="xid", detail="XID 79", xid=79)
    bodies = [
        b"not json",
        b"[" * 5000,
        beat_of({"gpu": -1, "kind": "xid", "detail": ""}),
        beat_of({"gpu": 0, "kind": "melted", "detail": ""}),
        beat_of({"gpu": 0, "kind": "xid", "detail": "x" * 5000}),
        # An unknown field nested deeper than any decoder should recurse.
        beat_of({"gpu": 0, "kind": "xid", "detail": "", "x": "NEST"}).replace(
            b'"NEST"', b"[" * 5000 + b"]" * 5000
        ),
        # A body that names n2, on n1's subject: refused (were it read as n1's, GPU 1 of
        # n1 would turn unhealthy).
        msgspec.json.encode(Heartbeat(node_id="n2", at=0, running=0, faults=[other])),
    ]
    try:
        async with background(telemetry.run()):
            await asyncio.sleep(0.3)
            for body in bodies:
                await event_log.nc.publish(heartbeat("n1"), body)
            # A node that never registered, and a GPU n1 does not have.
            ghost = Heartbeat(node_id="ghost", at=0, running=0, faults=[xid])
            await event_log.nc.publish(heartbeat("ghost"), msgspec.json.encode(ghost))
            far = GpuFault(gpu=7, kind="xid", detail="XID 79", xid=79)
            await event_log.nc.publish(
                heartbeat("n1"),
                msgspec.json.encode(Heartbeat(node_id="n1", at=0, running=0, faults=[far])),
            )
            await asyncio.sleep(1.5)
            # Still judging: a real fault is recorded after all of that.
            await event_log.nc.publish(
                heartbeat("n1"),
                msgspec.json.encode(Heartbeat(node_id="n1", at=0, running=0, faults=[xid])),
            )
            await eventually(event_log, NodeHealthChanged)
    finally:
        await telemetry_log.close()
    [change] = await events_of(event_log, NodeHealthChanged)
    assert (change.node_id, change.gpu) == ("n1", 0)  # type: ignore[attr-defined]
    refused = telemetry.counts.message().samples
    assert [(s.name, s.value) for s in refused] == [("allot_heartbeats_refused_total", 7)]
