"""``allot deploy``: the identities and server config of an installation on real machines,
and the production flow from them: the server runs the config, ``deploy init`` makes the
log and the users' mirror, ``users add`` and a reload admit a user."""

import asyncio
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

from allot.bus.identity import load
from allot.bus.local_ca import local_ca
from allot.bus.server import free_port, nats_server_binary
from allot.client import AsyncClient
from allot.proto.subjects import MIRROR
from tests import builders as b


def allot(*args: str, env: dict[str, str] | None = None) -> "subprocess.CompletedProcess[str]":
    return subprocess.run(
        [sys.executable, "-m", "allot.client.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def nats_config(tmp: Path, *flags: str) -> Path:
    out = tmp / "allot.conf"
    made = allot(
        "deploy", "nats-config", "--identities", str(tmp / "ids"), "--host", "127.0.0.1",
        "--store-dir", str(tmp / "js"), "--out", str(out), *flags,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    return out


def test_the_config_is_one_nats_server_takes_with_tls_and_in_a_cluster(tmp_path: Path) -> None:
    tls = local_ca(tmp_path / "tls")
    config = nats_config(
        tmp_path, "--nodes", "gpu-01,gpu-02", "--server-name", "nats-1",
        "--tls-ca", tls.ca, "--tls-cert", tls.cert, "--tls-key", tls.key,
        "--cluster-name", "allot", "--routes", "nats-route://127.0.0.1:6222",
    )  # fmt: skip
    checked = subprocess.run(
        [nats_server_binary(), "-t", "-c", str(config)], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stderr + checked.stdout
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    names = sorted(p.stem for p in (tmp_path / "ids").glob("*.json"))
    assert names == sorted(
        ["admin", "mirror", "intake", "ledger", "planner", "preemptor", "telemetry",
         "gpu-01", "gpu-02"]
    )  # fmt: skip
    for path in (tmp_path / "ids").glob("*.json"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600


async def test_a_server_run_from_the_config_admits_a_user_added_later(tmp_path: Path) -> None:
    port = free_port()
    config = nats_config(tmp_path, "--port", str(port), "--nodes", "gpu-01")
    url = f"nats://127.0.0.1:{port}"
    server = await asyncio.create_subprocess_exec(
        nats_server_binary(), "-c", str(config),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        for _ in range(100):
            ready = allot("deploy", "init", "--identities", str(tmp_path / "ids"),
                          "--nats-url", url)  # fmt: skip
            if ready.returncode == 0:
                break
            await asyncio.sleep(0.1)
        assert ready.returncode == 0, ready.stderr
        added = allot("users", "add", "alice", "--identities", str(tmp_path / "ids"))
        assert added.returncode == 0, added.stderr
        alice = load(tmp_path / "ids" / "alice.json")
        nats_config(tmp_path, "--port", str(port), "--nodes", "gpu-01")  # admits alice
        server.send_signal(signal.SIGHUP)
        await asyncio.sleep(0.5)
        admin = load(tmp_path / "ids" / "admin.json")
        async with (
            await AsyncClient.connect(url, alice) as client,
            await AsyncClient.connect(url, admin) as operator,
        ):
            assert client.events.settings.name == MIRROR
            event = b.submitted("j-1")
            appended = await operator.events.append(event)
            for _ in range(50):  # the mirror follows the log
                if await client.events.last_seq() == appended.seq:
                    break
                await asyncio.sleep(0.1)
            [record] = await client.events.read(1, appended.seq)
            assert record.event == event
    finally:
        server.terminate()
        await server.wait()
