"""Who connects to NATS. Every service, node agent, operator and user has an identity of
its own: a name (the principal its commands are sent as) and an nkey, NATS's own
public-key credential. The server's config holds only the public keys, each with what it may
publish and subscribe (``allot.bus.permissions``); the seed, the secret half, stays in one
file per identity that only its owner can read."""

import os
import ssl
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final, Literal

import msgspec
import nkeys

from allot.proto.subjects import MAX_PRINCIPAL, inbox_prefix, is_principal

Role = Literal[
    "operator", "user", "intake", "ledger", "planner", "preemptor", "telemetry", "metrics",
    "view", "node", "mirror",
]  # fmt: skip
SERVICES: Final = ("intake", "ledger", "planner", "preemptor", "telemetry", "metrics", "view")
MIRROR_MAKER: Final = "mirror"  # makes the users' mirror of the log (docs/adr/0015)
OPERATOR: Final = "admin"  # the identity an installation makes for its operator's CLI


class IdentityError(Exception):
    """An identity file that cannot be used, and why."""


class Identity(msgspec.Struct, frozen=True, kw_only=True):
    name: str  # a subject token: commands are sent as ``allot.cmd.<name>.…``
    role: Role
    seed: str  # the nkey user seed ("SU…"): whoever has it is this identity
    node_id: str | None = None  # a node agent's node

    @property
    def public_key(self) -> str:
        key: bytes = nkeys.from_seed(bytearray(self.seed.encode())).public_key
        return key.decode()

    def sign(self, nonce: bytes) -> bytes:
        """``nonce`` signed with this identity's key, as a server asks at CONNECT."""
        signature: bytes = nkeys.from_seed(bytearray(self.seed.encode())).sign(nonce)
        return signature

    @property
    def operator(self) -> bool:
        return self.role == "operator"


def new_identity(name: str, role: Role, node_id: str | None = None) -> Identity:
    if not is_principal(name):
        raise IdentityError(
            f"name={name!r}: an identity's name is 1 to {MAX_PRINCIPAL} letters, digits, '_' or '-'"
        )
    seed = nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER).decode()
    return Identity(name=name, role=role, seed=seed, node_id=node_id)


def save(identity: Identity, path: Path) -> None:
    """Write ``identity`` readable by its owner alone, in a folder only the owner can list;
    never half-written."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    partial = path.with_suffix(".partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(msgspec.json.encode(identity))
    partial.replace(path)


def load(path: Path) -> Identity:
    try:
        data = path.read_bytes()
    except OSError as error:
        raise IdentityError(f"cannot read the identity {path}: {error.strerror}") from None
    try:
        identity = msgspec.json.decode(data[: 64 << 10], type=Identity)
        identity.public_key  # noqa: B018  (a seed that is no nkey fails here, not at connect)
    except (msgspec.DecodeError, nkeys.NkeysError, ValueError) as error:
        raise IdentityError(f"{path} is not an Allot identity: {error}") from None
    if not is_principal(identity.name):
        raise IdentityError(f"{path}: name={identity.name[:100]!r} is not an identity's name")
    return identity


def connect_options(
    principal: str, identity: Identity | None, tls: ssl.SSLContext | None = None
) -> dict[str, Any]:
    """What ``nats.connect`` needs to connect as ``identity`` (None: to a server without
    authorization), over ``tls`` where given (``allot.bus.tls``), and take replies in the
    inbox of ``principal``."""
    options: dict[str, Any] = {"inbox_prefix": inbox_prefix(principal)}
    if identity is not None:
        options["nkeys_seed_str"] = identity.seed
    if tls is not None:
        options["tls"] = tls
    return options


class Keyring:
    """The identities of one installation, a file each under ``folder``: what ``allot up``
    makes for its services, node agents and operator, and the users added since. The
    server's config admits exactly these (``allot.bus.permissions``)."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)

    def path(self, name: str) -> Path:
        return self.folder / f"{name}.json"

    def ensure(self, name: str, role: Role, node_id: str | None = None) -> Path:
        """The identity ``name``, made if there is none yet (kept across restarts)."""
        path = self.path(name)
        if not path.exists():
            save(new_identity(name, role, node_id), path)
        return path

    def add(self, name: str, role: Role) -> Path:
        """A new identity; refused if the name is taken (by a service or anyone)."""
        identity = new_identity(name, role)  # refuses a name that is no principal's
        if self.path(name).exists():
            raise IdentityError(f"name={name!r}: there is an identity of that name already")
        save(identity, self.path(name))
        return self.path(name)

    def ensure_installation(self, nodes: Iterable[str]) -> None:
        """The identities an installation needs: its operator, the maker of the users'
        mirror, each service and the agent of each of ``nodes``."""
        self.ensure(OPERATOR, "operator")
        self.ensure(MIRROR_MAKER, "mirror")
        for service in SERVICES:
            self.ensure(service, service)
        for node in nodes:
            self.ensure(node, "node", node)

    def all(self) -> list[Identity]:
        return [load(path) for path in sorted(self.folder.glob("*.json"))]
