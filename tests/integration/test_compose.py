"""docker-compose.yml: every Allot service is health-checked through its own health
endpoint, waits for NATS to be healthy, and the node agent keeps its jobs' output and
checkpoints on named volumes. No Docker runs here: the file is read, and each healthcheck's
command is run as the container would run it, against a real service process."""

import asyncio
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from allot.bus import EmbeddedNats
from allot.bus.server import free_port

COMPOSE = Path(__file__).parents[2] / "docker-compose.yml"


def services() -> dict[str, dict[str, Any]]:
    return dict(yaml.safe_load(COMPOSE.read_text())["services"])


def allot_services() -> dict[str, dict[str, Any]]:
    return {name: s for name, s in services().items() if s.get("image") == "allot:dev"}


def flag(command: list[str], name: str) -> str | None:
    return command[command.index(name) + 1] if name in command else None


def test_every_allot_service_is_checked_through_its_health_port() -> None:
    found = allot_services()
    assert {"intake", "ledger", "planner", "preemptor", "telemetry", "metrics", "view",
            "node-1"} <= found.keys()  # fmt: skip
    for name, service in found.items():
        port = flag(service["command"], "--health-port")
        assert port is not None, f"{name}: no --health-port"
        check = " ".join(service["healthcheck"]["test"])
        assert f"http://127.0.0.1:{port}/readyz" in check, name
        assert service["depends_on"]["nats"] == {"condition": "service_healthy"}, name
    assert "healthcheck" in services()["nats"]


def test_the_node_keeps_output_and_checkpoints_on_named_volumes() -> None:
    compose = yaml.safe_load(COMPOSE.read_text())
    nodes = {n: s for n, s in allot_services().items() if "allot.services.node" in s["command"]}
    assert nodes
    for name, node in nodes.items():
        mounts = dict(reversed(volume.split(":")[:2]) for volume in node["volumes"])
        work = flag(node["command"], "--work-dir")
        checkpoints = flag(node["command"], "--checkpoint-root")
        assert work in mounts, name
        assert checkpoints in mounts, name
        assert mounts[work] != mounts[checkpoints], name
        assert {mounts[work], mounts[checkpoints]} <= compose["volumes"].keys(), name


async def test_the_healthcheck_passes_only_while_the_service_is_ready(tmp_path: Path) -> None:
    intake = allot_services()["intake"]
    command = [part.replace("nats://nats:4222", "{url}") for part in intake["command"]]
    port = free_port()
    given = flag(command, "--health-port")
    assert given is not None
    check = [part.replace(f":{given}/", f":{port}/") for part in intake["healthcheck"]["test"]]
    assert check[:2] == ["CMD", "python"]

    async def healthy() -> bool:
        ran = await asyncio.create_subprocess_exec(
            sys.executable, *check[2:],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        return await ran.wait() == 0

    async def until(expected: bool) -> None:
        for _ in range(100):
            if await healthy() == expected:
                return
            await asyncio.sleep(0.2)
        raise AssertionError(f"the healthcheck never became {expected}: {shlex.join(check)}")

    nats = await EmbeddedNats(tmp_path / "nats").start()
    command = [part.format(url=nats.url) for part in command]
    command[command.index("--health-port") + 1] = str(port)
    assert command[:2] == ["python", "-m"]
    process = await asyncio.create_subprocess_exec(sys.executable, *command[1:])
    try:
        await until(True)
        await nats.stop()
        await until(False)
    finally:
        process.terminate()
        await process.wait()
        await nats.stop()
