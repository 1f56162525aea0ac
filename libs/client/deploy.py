"""``allot deploy nats-config``: the identities and the NATS server config of an installation
on real machines, one server or a cluster, with or without TLS (``deploy/README.md``).

It is the same config ``allot up`` gives its own server (``allot.bus.permissions``): the
same accounts, the same rights for each identity. Identities that are missing from the
folder are made; those there are kept, so it can be run again after ``allot users add``.
"""

import argparse
import os
import secrets
import ssl
import sys
from pathlib import Path

from allot.bus.eventlog import EventLog
from allot.bus.identity import MIRROR_MAKER, OPERATOR, SERVICES, IdentityError, Keyring, load
from allot.bus.permissions import Cluster, server_config
from allot.bus.tls import ServerTls, TlsError, from_environment
from allot.bus.urls import redacted
from allot.client.client import AsyncClient
from allot.proto.subjects import StreamSettings, is_id


async def prepare_log(
    url: str, keyring: Keyring | None, tls: ssl.SSLContext | None, replicas: int = 1
) -> None:
    """Create the log's stream and, with identities, the users' mirror of it, where they
    are missing, each kept in ``replicas`` copies (a JetStream cluster's): as the operator,
    and as the one identity that may make the mirror."""
    settings = StreamSettings(replicas=replicas)
    operator = load(keyring.path(OPERATOR)) if keyring is not None else None
    async with await AsyncClient.connect(url, operator, tls) as client:
        await EventLog(client.events.nc, settings).ensure_stream()
    if keyring is not None:
        mirror = load(keyring.path(MIRROR_MAKER))
        async with await AsyncClient.connect(url, mirror, tls) as maker:
            await EventLog(maker.events.nc, settings).ensure_mirror()


async def cmd_deploy_init(args: argparse.Namespace) -> int:
    """Create the log's stream and the users' mirror on a server that runs the config."""
    try:
        await prepare_log(
            args.nats_url, Keyring(args.identities), from_environment(), args.replicas
        )
    except (IdentityError, TlsError) as error:
        print(f"allot: {error}", file=sys.stderr)
        return 2
    print(f"the log and the users' mirror of it are ready on {redacted(args.nats_url)}")
    return 0


async def cmd_deploy_nats_config(args: argparse.Namespace) -> int:
    nodes = node_ids(args.nodes)
    if isinstance(nodes, str):
        print(f"allot: --nodes: {nodes}", file=sys.stderr)
        return 2
    tls_files = (args.tls_ca, args.tls_cert, args.tls_key)
    if any(tls_files) and not all(tls_files):
        print("allot: TLS needs --tls-ca, --tls-cert and --tls-key together", file=sys.stderr)
        return 2
    if args.cluster_name and not all(tls_files):
        print("allot: --cluster-name: routes carry the log and its secrets between machines; "
              "give --tls-ca, --tls-cert and --tls-key too", file=sys.stderr)  # fmt: skip
        return 2
    tls = (
        ServerTls(
            ca=str(Path(args.tls_ca).resolve()),
            cert=str(Path(args.tls_cert).resolve()),
            key=str(Path(args.tls_key).resolve()),
            verify=args.tls_verify,
        )
        if all(tls_files)
        else None
    )
    keyring = Keyring(args.identities)
    try:
        keyring.ensure_installation(nodes)
        identities = keyring.all()
    except (IdentityError, OSError) as error:
        print(f"allot: {error}", file=sys.stderr)
        return 2
    routes = [r for r in args.routes.split(",") if r] if args.routes else []
    config = server_config(
        identities,
        host=args.host,
        port=args.port,
        store_dir=args.store_dir,
        tls=tls,
        server_name=args.server_name,
        cluster=(
            Cluster(
                name=args.cluster_name,
                port=args.cluster_port,
                routes=tuple(routes),
                secret=route_secret(Path(args.identities)),
            )
            if args.cluster_name
            else None
        ),
    )
    if args.out is None:
        sys.stdout.write(config)
    else:
        write_private(Path(args.out), config)
        print(f"wrote {args.out}: {len(identities)} identities from {args.identities}",
              file=sys.stderr)  # fmt: skip
    return 0


def node_ids(text: str | None) -> list[str] | str:
    """The node ids of a comma-separated list, or what is wrong with it."""
    nodes = [n for n in text.split(",") if n] if text else []
    bad = [n for n in nodes if not is_id(n)]
    if bad:
        return f"{bad[0][:100]!r} is no node id (letters, digits, '_', '-')"
    reserved = [n for n in nodes if n in (OPERATOR, MIRROR_MAKER, *SERVICES)]
    if reserved:
        return f"{reserved[0]!r} names an identity of Allot's own; name the node otherwise"
    return nodes


def replica_count(given: str) -> int:
    """JetStream keeps a stream in 1 to 5 copies; an even count survives no more losses
    than the odd one below it, and costs a copy more."""
    if given not in ("1", "3", "5"):
        raise argparse.ArgumentTypeError(f"{given!r}: 1, 3 or 5 copies of the log")
    return int(given)


def route_secret(identities: Path) -> str:
    """The secret the servers of the cluster present to each other as routes: made once,
    kept with the identities (run the command for each server with the same folder)."""
    path = identities / "routes.secret"
    if not path.exists():
        write_private(path, secrets.token_urlsafe(32))
    return path.read_text().strip()


def write_private(path: Path, text: str) -> None:
    """Write ``text`` readable by its owner alone (the config lists who may connect), never
    half-written."""
    partial = path.with_suffix(path.suffix + ".partial")
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as out:
        out.write(text)
    partial.replace(path)


def add_parser(
    commands: "argparse._SubParsersAction[argparse.ArgumentParser]",
) -> "argparse._SubParsersAction[argparse.ArgumentParser]":
    """``allot deploy`` and its subcommands; the subcommands, for more to be added."""
    deploy = commands.add_parser("deploy", help="run Allot on real machines (deploy/README.md)")
    sub = deploy.add_subparsers(dest="deploy_command", required=True)
    init = sub.add_parser(
        "init", help="create the log and the users' mirror of it, once the server runs"
    )
    init.set_defaults(handler=cmd_deploy_init)
    init.add_argument("--identities", type=Path, required=True, help="the identities folder")
    init.add_argument(
        "--nats-url",
        default=os.environ.get("ALLOT_NATS_URL", "nats://127.0.0.1:4222"),
        help="the server, or a cluster's servers comma-separated (default: $ALLOT_NATS_URL "
        "or nats://127.0.0.1:4222)",
    )
    init.add_argument(
        "--replicas", type=replica_count, default=1,
        help="copies of the log (and of the users' mirror) a JetStream cluster keeps: 1, 3 "
        "or 5 (default 1; a cluster of three servers or more: 3)",
    )  # fmt: skip
    config = sub.add_parser(
        "nats-config",
        help="make the identities and print the NATS server config of an installation",
    )
    config.set_defaults(handler=cmd_deploy_nats_config)
    config.add_argument(
        "--identities",
        type=Path,
        required=True,
        help="the folder of identity files (made if missing; keep it private)",
    )
    config.add_argument("--nodes", help="node ids of the node agents, comma-separated")
    config.add_argument("--host", default="0.0.0.0", help="address clients connect to")
    config.add_argument("--port", type=int, default=4222)
    config.add_argument("--store-dir", default="/var/lib/nats", help="JetStream's files")
    config.add_argument("--server-name", help="this server's name (each of a cluster's differs)")
    config.add_argument("--tls-ca", help="CA file clients' and routes' certificates chain to")
    config.add_argument("--tls-cert", help="this server's certificate")
    config.add_argument("--tls-key", help="its private key")
    config.add_argument(
        "--tls-verify", action="store_true", help="also require a client certificate the CA signed"
    )
    config.add_argument("--cluster-name", help="join a JetStream cluster of this name")
    config.add_argument("--cluster-port", type=int, default=6222, help="port for routes")
    config.add_argument(
        "--routes", help="the cluster's route URLs, comma-separated (nats-route://host:6222,...)"
    )
    config.add_argument("--out", help="write the config here (owner-only) instead of stdout")
    return sub
