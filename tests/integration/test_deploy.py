"""``allot deploy``: the identities and server config of an installation on real machines,
and the production flow from them: the server runs the config, ``deploy init`` makes the
log and the users' mirror, ``users add`` and a reload admit a user."""

import asyncio
import contextlib
import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import nats

from allot.bus.identity import load
from allot.bus.local_ca import issue, local_ca
from allot.bus.server import free_port, nats_server_binary
from allot.bus.tls import client_context
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
        ["admin", "mirror", "intake", "ledger", "planner", "preemptor", "telemetry", "metrics",
         "view", "gpu-01", "gpu-02"]
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


async def wait_for_port(port: int) -> None:
    for _ in range(200):
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        except OSError:
            await asyncio.sleep(0.05)
    raise AssertionError(f"nothing listens on {port}")


def test_a_cluster_needs_tls(tmp_path: Path) -> None:
    made = allot(
        "deploy", "nats-config", "--identities", str(tmp_path / "ids"), "--cluster-name", "a",
        "--routes", "nats-route://127.0.0.1:6222",
    )  # fmt: skip
    assert made.returncode == 2
    assert "--tls-ca" in made.stderr


async def test_a_server_with_a_certificate_of_the_ca_but_not_the_routes_secret_cannot_join(
    tmp_path: Path,
) -> None:
    """The CA signs every client's certificate too (``--tls-verify``), so a certificate
    alone must not make a route: a route may publish anything, onto the log too."""
    tls = local_ca(tmp_path / "tls")
    ca, ca_key = Path(tls.ca), tmp_path / "tls" / "ca-key.pem"
    ports, route_ports = [free_port(), free_port()], [free_port(), free_port()]
    routes = ",".join(f"nats-route://127.0.0.1:{p}" for p in route_ports)
    servers = []
    try:
        for i in range(2):
            cert, key = issue(ca, ca_key, f"nats-{i}", ("127.0.0.1",), server=True)
            (tmp_path / f"nats-{i}.pem").write_bytes(cert)
            (tmp_path / f"nats-{i}-key.pem").write_bytes(key)
            config = nats_config(
                tmp_path, "--port", str(ports[i]), "--server-name", f"nats-{i}",
                "--cluster-name", "allot", "--cluster-port", str(route_ports[i]),
                "--routes", routes, "--tls-ca", tls.ca, "--tls-verify",
                "--tls-cert", str(tmp_path / f"nats-{i}.pem"),
                "--tls-key", str(tmp_path / f"nats-{i}-key.pem"),
            ).rename(tmp_path / f"nats-{i}.conf")  # fmt: skip
            servers.append(
                await asyncio.create_subprocess_exec(
                    nats_server_binary(),
                    "-c",
                    str(config),
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        cert, key = issue(ca, ca_key, "admin", server=False)
        (tmp_path / "admin.pem").write_bytes(cert)
        (tmp_path / "admin-key.pem").write_bytes(key)
        client_tls = client_context(
            tls.ca, str(tmp_path / "admin.pem"), str(tmp_path / "admin-key.pem")
        )
        for port in ports:
            await wait_for_port(port)
        admin = load(tmp_path / "ids" / "admin.json")
        url = f"nats://127.0.0.1:{ports[0]}"
        async with await AsyncClient.connect(url, admin, client_tls) as operator:
            async with asyncio.timeout(30):
                while True:  # the cluster elects its JetStream leader
                    try:
                        await asyncio.wait_for(operator.events.ensure_stream(), 3)
                        break
                    except (TimeoutError, nats.errors.Error):
                        await asyncio.sleep(0.5)
            before = (await operator.events.append(b.submitted("j-1"))).seq

            # A stranger's own server, with a certificate of the CA (a user's), but no secret.
            rogue_port = free_port()
            (tmp_path / "rogue.conf").write_text(json.dumps({
                "host": "127.0.0.1", "port": rogue_port, "server_name": "rogue",
                "cluster": {
                    "name": "allot", "host": "127.0.0.1", "port": free_port(),
                    "routes": [f"nats-route://route:guess@127.0.0.1:{route_ports[0]}"],
                    "tls": {"ca_file": tls.ca, "cert_file": str(tmp_path / "admin.pem"),
                            "key_file": str(tmp_path / "admin-key.pem")},
                },
                "accounts": {"CORE": {"users": [{"user": "evil", "password": "evil"}]}},
            }))  # fmt: skip
            servers.append(
                await asyncio.create_subprocess_exec(
                    nats_server_binary(),
                    "-c",
                    str(tmp_path / "rogue.conf"),
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
            await wait_for_port(rogue_port)
            await asyncio.sleep(3)  # long enough to have joined, were it let in
            evil = await nats.connect(f"nats://evil:evil@127.0.0.1:{rogue_port}")
            try:
                with contextlib.suppress(nats.errors.Error, TimeoutError):
                    await evil.request("allot.evt.job.j-1.JobExited", b"{}", timeout=2)
            finally:
                await evil.close()
            await asyncio.sleep(1)
            assert await operator.events.last_seq() == before
    finally:
        for server in servers:
            server.terminate()
            await server.wait()


def test_a_node_cannot_be_named_as_a_service(tmp_path: Path) -> None:
    """Its agent would be handed the service's identity file, and the service's rights."""
    made = allot("deploy", "nats-config", "--identities", str(tmp_path / "ids"), "--nodes",
                 "gpu-01,intake")  # fmt: skip
    assert made.returncode == 2
    assert "'intake'" in made.stderr
    assert not (tmp_path / "ids").exists()  # nothing made
