"""A JetStream cluster on one machine: ``size`` embedded nats-servers on loopback, each
with its own data dir, client port, route port and name, every one routing to all the
others (docs/adr/0023). ``allot up --nats-cluster 3`` and the tests start one; on real
machines, ``allot deploy nats-config --cluster-name`` writes each server's config instead.

The members share one configuration otherwise (identities and accounts, TLS), so a client
may connect to any of them, and is given all of their URLs to find another when one goes.
"""

import asyncio
import secrets
from pathlib import Path

from allot.bus.identity import Keyring
from allot.bus.permissions import Cluster
from allot.bus.server import Backoff, EmbeddedNats, free_port
from allot.bus.tls import ServerTls
from allot.proto.subjects import LOG_REPLICAS

CLUSTER_NAME = "allot"


class NatsCluster:
    """``size`` members named ``n1``…, in ``data_dir/n1``…; ``async with`` or
    ``start()``/``stop()``, as ``EmbeddedNats``. The websocket, where asked for, is on
    the first member (a browser is given one address)."""

    def __init__(
        self,
        data_dir: Path,
        size: int = 3,
        *,
        host: str = "127.0.0.1",
        restart: Backoff | None = None,
        keyring: Keyring | None = None,
        tls: ServerTls | None = None,
        websocket_port: int | None = None,
    ):
        if size < LOG_REPLICAS:
            raise ValueError(f"a NATS cluster of {size}: the log's {LOG_REPLICAS} copies need "
                             f"at least {LOG_REPLICAS} servers")  # fmt: skip
        self.data_dir = Path(data_dir)
        route_ports = [free_port(host) for _ in range(size)]
        routes = tuple(f"nats-route://{host}:{port}" for port in route_ports)
        # Only the members present it, and each writes it into its own config (owner-only):
        # a new one for each start is as good as a kept one.
        secret = secrets.token_urlsafe(32)
        self.members = [
            EmbeddedNats(
                self.data_dir / f"n{number}",
                host=host,
                restart=restart,
                keyring=keyring,
                tls=tls,
                websocket_port=websocket_port if number == 1 else None,
                server_name=f"n{number}",
                cluster=Cluster(name=CLUSTER_NAME, port=port, routes=routes, secret=secret),
            )
            for number, port in enumerate(route_ports, start=1)
        ]

    @property
    def url(self) -> str:
        """Every member's URL, comma-separated, as ``--nats-url`` takes them."""
        return ",".join(member.url for member in self.members)

    @property
    def websocket_url(self) -> str | None:
        return self.members[0].websocket_url

    @property
    def tls(self) -> ServerTls | None:
        return self.members[0].tls

    @tls.setter
    def tls(self, tls: ServerTls | None) -> None:
        for member in self.members:
            member.tls = tls

    def member(self, server_name: str) -> EmbeddedNats:
        """The member JetStream calls ``server_name`` (a stream's leader, say)."""
        return next(m for m in self.members if m.server_name == server_name)

    def reload(self) -> None:
        """Admit the keyring as it is now, on every member."""
        for member in self.members:
            member.reload()

    async def start(self, timeout: float = 30.0) -> "NatsCluster":
        """All members at once: JetStream is ready on none until a majority has met."""
        try:
            await asyncio.gather(*(member.start(timeout) for member in self.members))
        except BaseException:
            await self.stop()
            raise
        return self

    async def stop(self) -> None:
        await asyncio.gather(*(member.stop() for member in self.members))

    async def __aenter__(self) -> "NatsCluster":
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
