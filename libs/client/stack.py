"""A whole Allot on one machine: embedded NATS, every service as a child process, simulated
nodes. ``allot up`` and the end-to-end tests both use it."""

import asyncio
import contextlib
import logging
import os
import re
import signal
import socket
import ssl
import sys
import tomllib
from pathlib import Path

import msgspec

from allot.bus.cluster import NatsCluster
from allot.bus.identity import OPERATOR, Identity, Keyring, load
from allot.bus.local_ca import local_ca
from allot.bus.server import Backoff, EmbeddedNats, dies_with_parent, free_port
from allot.bus.tls import CA_ENV, client_context
from allot.client.client import AsyncClient
from allot.client.deploy import prepare_log
from allot.proto.subjects import LOG_REPLICAS

log = logging.getLogger("allot.up")
_NODES = re.compile(r"^(\d+)x(\d+)$")
_NODE_ID = re.compile(r"^[A-Za-z0-9_-]+$")


class NodeShape(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A simulated node: its GPUs and topology, as a cluster file or --nodes declares it.
    ``simulated = false``: this host's own GPUs, found through NVML (``gpus`` and the
    topology are then what NVML says)."""

    node_id: str
    gpus: int
    gpu_model: str = "SIM-H100"
    labels: dict[str, str] = {}
    nvlink_islands: str | None = None  # e.g. "0-3,4-7"; none: all GPUs share NVLink
    simulated: bool = True


NODES_PER_RACK = 4


def parse_nodes(text: str) -> list[NodeShape]:
    """``2x8`` -> two nodes of eight GPUs; ``1x8,2x4`` mixes shapes."""
    shapes: list[NodeShape] = []
    for part in text.split(","):
        match = _NODES.match(part.strip())
        if not match or int(match[1]) < 1 or int(match[2]) < 1:
            raise ValueError(f"--nodes {text!r}: expected COUNTxGPUS such as 2x8 or 1x8,2x4")
        for _ in range(int(match[1])):
            rack = f"r{len(shapes) // NODES_PER_RACK + 1}"
            shapes.append(
                NodeShape(
                    node_id=f"node-{len(shapes) + 1}", gpus=int(match[2]), labels={"rack": rack}
                )
            )
    return shapes


def read_cluster(path: Path) -> list[NodeShape]:
    """Nodes from a TOML cluster file of ``[[nodes]]`` tables (node_id, gpus, gpu_model,
    labels, nvlink_islands). Raises ValueError naming the node and the field."""
    try:
        tables = tomllib.loads(path.read_text()).get("nodes", [])
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise ValueError(f"{path}: {error}") from None
    shapes: list[NodeShape] = []
    for number, table in enumerate(tables, start=1):
        try:
            shape = msgspec.convert(table, NodeShape)
        except msgspec.ValidationError as error:
            raise ValueError(f"{path}: node {number}: {error}") from None
        if shape.gpus < 1 or not _NODE_ID.fullmatch(shape.node_id):
            raise ValueError(f"{path}: node {number}: node_id and gpus >= 1 are required")
        if shape.node_id in {s.node_id for s in shapes}:
            raise ValueError(f"{path}: node {number}: node_id {shape.node_id!r} twice")
        shapes.append(shape)
    if not shapes:
        raise ValueError(f"{path}: no [[nodes]]")
    return shapes


def other_log(data_dir: Path, cluster: bool) -> str | None:
    """What to tell of a log in ``data_dir`` that the other kind of NATS kept (one server's
    for a cluster, a cluster's for one server): the one about to start is not it, and
    starts empty (docs/adr/0023). None if there is none."""
    single, members = data_dir / "nats", data_dir / "nats-cluster"
    if cluster and (single / "jetstream").exists():
        return (
            f"the log in {single} is one server's, not this cluster's: to carry it over, "
            "`allot log export` it from `allot up` without --nats-cluster and "
            "`allot log import` it here"
        )
    if not cluster and any(members.glob("*/jetstream")):
        return (
            f"the log in {members} is a NATS cluster's: `allot up --nats-cluster` runs on it; "
            "this one server starts its own"
        )
    return None


class Child:
    def __init__(self, name: str, argv: list[str], log_path: Path):
        self.name = name
        self.argv = argv
        self.log_path = log_path
        self.process: asyncio.subprocess.Process | None = None
        self.supervised = True  # restart when it dies on its own


def _usable(port: int | None, what: str) -> int | None:
    """``port``, or a free one when it is 0 or taken (by another ``allot up``, say)."""
    if port is None:
        return None
    if port != 0:
        with contextlib.suppress(OSError), socket.create_server(("127.0.0.1", port)):
            return port
        log.warning("port %d is taken: serving %s on another", port, what)
    return free_port()


class Stack:
    def __init__(
        self,
        data_dir: Path,
        nodes: list[NodeShape],
        *,
        node_timeout_s: float = 10.0,
        heartbeat_s: float = 1.0,
        stop_grace_s: float = 10.0,
        accounting_interval_s: float = 60.0,
        restart: bool = True,
        secure: bool = True,
        tls: bool = False,
        metrics_port: int | None = None,
        dashboard_port: int | None = None,
        view_refresh_s: float = 1.0,
        planner_args: tuple[str, ...] = (),
        websocket: bool = False,
        nats_cluster: int | None = None,
        planners: int = 1,
    ):
        """``metrics_port``: serve Prometheus metrics there (0: on a free port); None: not.
        ``dashboard_port``: the view service serves the dashboard there, on 127.0.0.1 (0: on
        a free port); None: not. ``nats_cluster``: a JetStream cluster of that many
        servers, the log kept in three copies (docs/adr/0023); None: one server.
        ``planners``: how many planner processes run at once (more than one only to show
        that racing plans are safe: docs/adr/0004); the second is the child ``planner-2``,
        and so on."""
        self.data_dir = Path(data_dir).resolve()
        self.nodes = nodes
        self.node_timeout_s = node_timeout_s
        self.heartbeat_s = heartbeat_s
        self.stop_grace_s = stop_grace_s
        self.accounting_interval_s = accounting_interval_s
        self.restart = restart
        self.backoff = Backoff()
        # Secure: every process connects as an identity of its own, with only the rights its
        # work needs (docs/adr/0015); else anyone may connect and do anything.
        self.keyring = Keyring(self.data_dir / "identities") if secure else None
        # Browsers connect there as their users, for the dashboard's actions.
        websocket_port = free_port() if websocket else None
        self.nats: EmbeddedNats | NatsCluster = (
            NatsCluster(
                self.data_dir / "nats-cluster",
                nats_cluster,
                restart=self.backoff if restart else None,
                keyring=self.keyring,
                websocket_port=websocket_port,
            )
            if nats_cluster is not None
            else EmbeddedNats(
                self.data_dir / "nats",
                restart=self.backoff if restart else None,
                keyring=self.keyring,
                websocket_port=websocket_port,
            )
        )
        # With TLS, the server's certificate is signed by a CA of this stack's own
        # (``allot.bus.local_ca``), which every client of it is given to trust.
        self.tls_dir = self.data_dir / "tls" if tls else None
        self.metrics_port = _usable(metrics_port, "metrics")
        self.dashboard_port = _usable(dashboard_port, "the dashboard")
        self.view_refresh_s = view_refresh_s  # how often the read model recomputes the queue
        self.planner_args = list(planner_args)  # its policy, as `allot-planner --help` says
        self.planners = planners
        self.children: dict[str, Child] = {}
        self._watchers: list[asyncio.Task[None]] = []
        self._stopping = False

    @property
    def url(self) -> str:
        return self.nats.url

    @property
    def nats_servers(self) -> list[EmbeddedNats]:
        """Its NATS server, or each server of its NATS cluster."""
        return self.nats.members if isinstance(self.nats, NatsCluster) else [self.nats]

    @property
    def operator(self) -> Path | None:
        """The operator's identity file (for the CLI: ``ALLOT_IDENTITY``); None if not secure."""
        return self.keyring.path(OPERATOR) if self.keyring is not None else None

    def operator_identity(self) -> Identity | None:
        return load(self.operator) if self.operator is not None else None

    @property
    def tls_ca(self) -> Path | None:
        """The CA clients trust the server by (for the CLI: ``ALLOT_TLS_CA``); None without
        TLS."""
        return self.tls_dir / "ca.pem" if self.tls_dir is not None else None

    async def client(self) -> AsyncClient:
        """A client of this stack, as its operator."""
        return await AsyncClient.connect(self.url, self.operator_identity(), self._tls())

    def _tls(self) -> ssl.SSLContext | None:
        return client_context(str(self.tls_ca)) if self.tls_ca is not None else None

    @property
    def metrics_url(self) -> str | None:
        port = self.metrics_port
        return f"http://127.0.0.1:{port}/metrics" if port is not None else None

    @property
    def dashboard_url(self) -> str | None:
        port = self.dashboard_port
        return f"http://127.0.0.1:{port}/" if port is not None else None

    @property
    def logs(self) -> Path:
        return self.data_dir / "logs"

    def node_work_dir(self, node_id: str) -> Path:
        return self.data_dir / "nodes" / node_id

    def _simulated(self, node: NodeShape) -> list[str]:
        islands = ["--nvlink-islands", node.nvlink_islands] if node.nvlink_islands else []
        return [
            *("--gpus", str(node.gpus), "--gpu-model", node.gpu_model, *islands),
            *("--simulated-faults", str(self.fault_file(node.node_id))),
        ]

    def fault_file(self, node_id: str) -> Path:
        """Where faults for a node's simulated GPUs are appended, one JSON line each."""
        return self.node_work_dir(node_id) / "simulated-faults.jsonl"

    async def start(self, timeout: float = 30.0) -> "Stack":
        try:
            await self._start(timeout)
        except BaseException:
            await self.stop()  # nothing half-started is left running
            raise
        return self

    async def _start(self, timeout: float) -> None:
        self.logs.mkdir(parents=True, exist_ok=True)
        if self.keyring is not None:
            self.keyring.ensure_installation(node.node_id for node in self.nodes)
        if said := other_log(self.data_dir, isinstance(self.nats, NatsCluster)):
            log.warning("%s", said)
        if self.tls_dir is not None:
            self.nats.tls = local_ca(self.tls_dir)
        await self.nats.start()
        replicas = LOG_REPLICAS if isinstance(self.nats, NatsCluster) else 1
        await prepare_log(self.url, self.keyring, self._tls(), replicas)  # before anyone needs it
        self._add("intake", [])
        self._add("ledger", ["--accounting-interval", str(self.accounting_interval_s)])
        self._add("planner", self.planner_args)
        for number in range(2, self.planners + 1):
            self._add(f"planner-{number}", self.planner_args, module="planner")
        self._add("telemetry", ["--node-timeout", str(self.node_timeout_s)])
        self._add("preemptor", ["--tick", str(min(1.0, self.heartbeat_s))])
        if self.metrics_port is not None:
            self._add("metrics", ["--port", str(self.metrics_port)])
        view = ["--refresh", str(self.view_refresh_s)]
        if self.dashboard_port is not None:
            view += ["--dashboard-port", str(self.dashboard_port)]
        if self.nats.websocket_url is not None:
            view += ["--nats-websocket-url", self.nats.websocket_url]
        self._add("view", view)
        for node in self.nodes:
            self._add(
                node.node_id,
                [
                    "--node-id",
                    node.node_id,
                    *(self._simulated(node) if node.simulated else []),
                    *[
                        arg
                        for k, v in sorted(node.labels.items())
                        for arg in ("--label", f"{k}={v}")
                    ],
                    "--work-dir",
                    str(self.node_work_dir(node.node_id)),
                    # Simulated nodes share this machine's disk, as real ones share storage.
                    "--checkpoint-root",
                    str(self.data_dir / "checkpoints"),
                    "--heartbeat",
                    str(self.heartbeat_s),
                    "--stop-grace",
                    str(self.stop_grace_s),
                ],
                module="node",
            )
        for child in self.children.values():
            await self._spawn(child)
            self._watchers.append(asyncio.create_task(self._watch(child)))
        await self._wait_ready(timeout)

    def _add(self, name: str, args: list[str], module: str | None = None) -> None:
        argv = [sys.executable, "-m", f"allot.services.{module or name}", "--nats-url", self.url]
        if self.keyring is not None:
            # A node agent is its node's identity; every other child, its service's.
            identity = name if module in (None, "node") else module
            argv += ["--identity", str(self.keyring.path(identity))]
        self.children[name] = Child(name, argv + args, self.logs / f"{name}.log")

    async def _spawn(self, child: Child) -> None:
        env = {**os.environ, CA_ENV: str(self.tls_ca)} if self.tls_ca is not None else None
        with open(child.log_path, "ab") as out:
            child.process = await asyncio.create_subprocess_exec(
                *child.argv,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                # Its own process group: a Ctrl-C reaches `allot up` alone, which stops
                # the children in order (services, jobs, NATS) rather than each dying at
                # once and NATS's exit looking like a crash. Killed, it takes them along.
                process_group=0,
                preexec_fn=dies_with_parent(),
            )

    async def _watch(self, child: Child) -> None:
        loop = asyncio.get_running_loop()
        delay: float | None = None
        while True:
            assert child.process is not None
            started = loop.time()
            code = await child.process.wait()
            if not self._should_restart(child):
                return
            delay = self.backoff.next(delay, loop.time() - started)
            log.warning(
                "%s exited with %s; restarting in %.1fs (see %s)",
                child.name, code, delay, child.log_path,
            )  # fmt: skip
            await asyncio.sleep(delay)
            if not self._should_restart(child):  # stop() may have begun meanwhile
                return
            await self._spawn(child)

    def _should_restart(self, child: Child) -> bool:
        return self.restart and child.supervised and not self._stopping

    async def _wait_ready(self, timeout: float) -> None:
        async with asyncio.timeout(timeout), await self.client() as client:
            await client.ready(timeout, ("intake", "ledger", "view"))
            wanted = {n.node_id for n in self.nodes}
            async with contextlib.aclosing(client.states()) as states:
                async for state in states:
                    if wanted <= {n for n, node in state.nodes.items() if not node.lost}:
                        return

    def kill(self, name: str) -> None:
        """SIGKILL one service and do not restart it (for failure tests)."""
        child = self.children[name]
        child.supervised = False
        if child.process is not None and child.process.returncode is None:
            child.process.kill()

    async def revive(self, name: str) -> None:
        """Start a killed service again, supervised."""
        child = self.children[name]
        if child.process is not None:
            await child.process.wait()
        child.supervised = True
        await self._spawn(child)
        self._watchers.append(asyncio.create_task(self._watch(child)))

    async def stop(self) -> None:
        """Stop every service, then the jobs they left running, then NATS."""
        self._stopping = True
        for watcher in self._watchers:
            watcher.cancel()
        running = [
            c.process for c in self.children.values() if c.process and c.process.returncode is None
        ]
        for service in running:
            with contextlib.suppress(ProcessLookupError):
                service.send_signal(signal.SIGTERM)
        for service in running:
            try:
                await asyncio.wait_for(service.wait(), 10)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    service.kill()
                await service.wait()
        await self._stop_jobs()
        await self.nats.stop()

    async def _stop_jobs(self) -> None:
        """SIGTERM every job process the nodes left running, SIGKILL after the grace period.
        (A node agent alone leaves its jobs for the next agent to adopt; stopping the whole
        stack stops them, and a restarted stack reports them as exited.)"""
        groups = []
        for pid_file in sorted(self.data_dir.glob("nodes/*/jobs/*/*/pid")):
            with contextlib.suppress(ValueError, OSError):
                groups.append(int(pid_file.read_text()))
        for signum in (signal.SIGTERM, signal.SIGKILL):
            live = [g for g in groups if _group_alive(g)]
            for group in live:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(group, signum)
            deadline = asyncio.get_running_loop().time() + self.stop_grace_s
            while live and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.05)
                live = [g for g in live if _group_alive(g)]

    async def __aenter__(self) -> "Stack":
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
