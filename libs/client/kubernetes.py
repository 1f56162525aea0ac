"""``allot deploy kubernetes``: the secrets of an installation on Kubernetes, as a folder
kustomize turns into Secrets and a ConfigMap (deploy/kubernetes/README.md, docs/adr/0025).

The folder holds the NATS config of the cluster's servers (``nats.conf``: the same accounts
and rights ``allot deploy nats-config`` gives, routes between the StatefulSet's pods), the
servers' TLS files, the identity of each service, of the operator and of each node agent,
and a ``kustomization.yaml`` naming them. The base's manifests refer to what it makes by
name. It is run again after ``allot users add`` or for a new node, with the same folder
of identities: identities there are kept, so the cluster keeps admitting them.
"""

import argparse
import json
import shutil
import sys
from pathlib import Path

from allot.bus.identity import MIRROR_MAKER, OPERATOR, SERVICES, IdentityError, Keyring
from allot.bus.permissions import Cluster, server_config
from allot.bus.tls import ServerTls
from allot.client.deploy import node_ids, route_secret, write_private

# Where the StatefulSet's pods find what the folder holds (deploy/kubernetes/base/nats.yaml).
NATS_TLS = "/etc/nats/tls"
NATS_STORE = "/data/jetstream"
NATS_PID = "/var/run/nats/nats.pid"
NATS_CLUSTER = "allot"
STATEFUL_SET = "nats"  # its pods are nats-0, nats-1, ...
HEADLESS_SERVICE = "nats-cluster"  # and are reached as nats-0.nats-cluster, ...
CLIENT_PORT, ROUTE_PORT = 4222, 6222


def routes(replicas: int) -> tuple[str, ...]:
    return tuple(
        f"nats-route://{STATEFUL_SET}-{i}.{HEADLESS_SERVICE}:{ROUTE_PORT}" for i in range(replicas)
    )


def nats_config(keyring: Keyring, replicas: int, secret: str) -> str:
    """The config every server of the StatefulSet runs; each is named by its pod
    (``--server_name``), which is all that differs between them. The servers tell clients
    of no other addresses of theirs: those would be the pods' IPs, which their certificate
    does not name, so clients reach them through the Service only."""
    config = server_config(
        keyring.all(),
        host="0.0.0.0",
        port=CLIENT_PORT,
        store_dir=NATS_STORE,
        pid_file=NATS_PID,
        tls=ServerTls(
            ca=f"{NATS_TLS}/ca.crt", cert=f"{NATS_TLS}/tls.crt", key=f"{NATS_TLS}/tls.key"
        ),
        cluster=Cluster(name=NATS_CLUSTER, port=ROUTE_PORT, routes=routes(replicas), secret=secret),
    )
    cluster = json.loads(config)
    cluster["cluster"]["no_advertise"] = True
    return json.dumps(cluster, indent=2) + "\n"


def kustomization(generated: dict[str, list[str]]) -> str:
    """The kustomization of the folder: a Secret for each group of files, and the CA as a
    ConfigMap for the clients (it is no secret, and they need nothing else of the TLS)."""
    lines = [
        "# Made by `allot deploy kubernetes`: this installation's secrets. Keep this folder",
        "# private and out of version control; make it again rather than edit it.",
        "apiVersion: kustomize.config.k8s.io/v1beta1",
        "kind: Kustomization",
        "generatorOptions:",
        "  labels:",
        "    app.kubernetes.io/part-of: allot",
        "secretGenerator:",
    ]
    for name, files in generated.items():
        lines.append(f"  - name: {name}")
        if name == "allot-nats-tls":
            lines.append("    type: kubernetes.io/tls")
        lines.append("    files:")
        lines += [f"      - {file}" for file in files]
    lines += [
        "configMapGenerator:",
        "  - name: allot-tls-ca",
        "    files:",
        "      - ca.pem=tls/ca.crt",
    ]
    return "\n".join(lines) + "\n"


def write_secrets(
    keyring: Keyring, tls: ServerTls, replicas: int, out: Path
) -> dict[str, list[str]]:
    """Write the folder ``out``; the files of each Secret, as the kustomization names them."""
    out.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_private(out / "nats.conf", nats_config(keyring, replicas, route_secret(keyring.folder)))
    generated: dict[str, list[str]] = {"allot-nats-config": ["nats.conf"]}
    tls_files = {"ca.crt": tls.ca, "tls.crt": tls.cert, "tls.key": tls.key}
    generated["allot-nats-tls"] = _copy(tls_files, out / "tls")
    nodes = sorted(i.name for i in keyring.all() if i.role == "node")
    for secret, folder, names in (
        ("allot-service-identities", "identities", SERVICES),
        ("allot-operator-identities", "operator", (OPERATOR, MIRROR_MAKER)),
        ("allot-node-identities", "nodes", nodes),
    ):
        files = {f"{name}.json": str(keyring.path(name)) for name in names}
        generated[secret] = _copy(files, out / folder)
    write_private(out / "kustomization.yaml", kustomization(generated))
    return generated


def _copy(files: dict[str, str], folder: Path) -> list[str]:
    """Copy each file to ``folder`` under its new name, readable by the owner alone; the
    copies' paths relative to the folder above."""
    folder.mkdir(mode=0o700, exist_ok=True)
    for name, source in files.items():
        write_private(folder / name, Path(source).read_text())
    return [f"{folder.name}/{name}" for name in files]


async def cmd_deploy_kubernetes(args: argparse.Namespace) -> int:
    nodes = node_ids(args.nodes)
    if isinstance(nodes, str):
        print(f"allot: --nodes: {nodes}", file=sys.stderr)
        return 2
    if args.nats_replicas < 1:
        print(f"allot: --nats-replicas: {args.nats_replicas} is no count of servers (1 or "
              "more; 3 keeps the log through the loss of one)", file=sys.stderr)  # fmt: skip
        return 2
    for flag, path in (("--tls-ca", args.tls_ca), ("--tls-cert", args.tls_cert),
                       ("--tls-key", args.tls_key)):  # fmt: skip
        if not Path(path).is_file():
            print(f"allot: {flag}: {path!r} is no file", file=sys.stderr)
            return 2
    tls = ServerTls(ca=args.tls_ca, cert=args.tls_cert, key=args.tls_key)
    keyring = Keyring(args.identities)
    out = Path(args.out)
    try:
        keyring.ensure_installation(nodes)
        if out.exists() and not (out / "kustomization.yaml").exists() and any(out.iterdir()):
            print(f"allot: --out: {out} holds files not made by this command; name an empty "
                  "or a new folder", file=sys.stderr)  # fmt: skip
            return 2
        # Written beside it, then put in its place: never half-written, and an identity
        # removed from the folder is gone from the Secrets too.
        partial = out.with_name(f".{out.name}.partial")
        shutil.rmtree(partial, ignore_errors=True)
        generated = write_secrets(keyring, tls, args.nats_replicas, partial)
        if out.exists():
            shutil.rmtree(out)
        partial.rename(out)
    except (IdentityError, OSError) as error:
        print(f"allot: {error}", file=sys.stderr)
        return 2
    nodes_made = len(generated["allot-node-identities"])
    print(f"wrote {out}: the NATS config of {args.nats_replicas} servers, their TLS files and "
          f"the identities of {len(SERVICES)} services and {nodes_made} nodes; "
          f"kubectl apply -k the overlay that lists it", file=sys.stderr)  # fmt: skip
    return 0


def add_parser(deploy: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    kubernetes = deploy.add_parser(
        "kubernetes",
        help="make the identities and write the Secrets of an installation on Kubernetes",
    )
    kubernetes.set_defaults(handler=cmd_deploy_kubernetes)
    kubernetes.add_argument(
        "--identities",
        type=Path,
        required=True,
        help="the folder of identity files (made if missing; keep it private)",
    )
    kubernetes.add_argument(
        "--nodes", help="node ids of the node agents, comma-separated: the GPU nodes' names"
    )
    kubernetes.add_argument(
        "--tls-ca", required=True, help="CA file the NATS servers' certificate chains to"
    )
    kubernetes.add_argument(
        "--tls-cert",
        required=True,
        help=f"the servers' certificate, for the names {STATEFUL_SET} and *.{HEADLESS_SERVICE}",
    )
    kubernetes.add_argument("--tls-key", required=True, help="its private key")
    kubernetes.add_argument(
        "--nats-replicas", type=int, default=3, help="servers in the StatefulSet (default 3)"
    )
    kubernetes.add_argument(
        "--out", required=True, help="the folder to write (an overlay's secrets/)"
    )
