"""How a command of the ``allot`` command line reaches Allot, and says what it found: the
NATS server ``allot up`` left word of (or the one named), as whom, and output as a table
for people or JSON for scripts."""

import argparse
import contextlib
import json
import os
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from allot.bus.identity import Identity, IdentityError, load
from allot.bus.tls import TlsError, client_context, from_environment
from allot.bus.urls import redacted
from allot.client import failures

if TYPE_CHECKING:
    from allot.client.client import AsyncClient
    from allot.client.oneshot import Connection


def allot_home() -> Path:
    return Path(os.environ.get("ALLOT_HOME", Path.home() / ".allot"))


def current_file() -> Path:
    """Where ``allot up`` leaves the URL of the NATS server it started."""
    return allot_home() / "current.json"


def resolve_nats_url(given: str | None) -> str:
    if given:
        return given
    if os.environ.get("ALLOT_NATS_URL"):
        return os.environ["ALLOT_NATS_URL"]
    with contextlib.suppress(FileNotFoundError, ValueError, KeyError):
        return str(json.loads(current_file().read_text())["nats_url"])
    raise SystemExit(
        "allot: no NATS URL: start Allot with `allot up`, or pass --nats-url / set ALLOT_NATS_URL"
    )


def emit(args: argparse.Namespace, data: Any, text: str) -> None:
    if args.json:
        print(json.dumps(data, indent=2, sort_keys=True, default=str))
    else:
        print(text)


def local_up(key: str) -> str | None:
    """What the ``allot up`` running here recorded under ``key`` (``identity``: its
    operator's identity file; ``tls_ca``: the CA of its server); None if it did not."""
    with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
        value = json.loads(current_file().read_text()).get(key)
        return value if isinstance(value, str) else None
    return None


def local_operator() -> Identity | None:
    """The operator's identity of the ``allot up`` running here, if this user can read it
    (whoever can read its files is its operator); None if it runs without identities."""
    path = local_up("identity")
    return load(Path(path)) if path else None


def credentials() -> tuple[Identity | None, ssl.SSLContext | None]:
    """Whom a command connects as: ``$ALLOT_IDENTITY``, else the local operator; and over
    which TLS: that of ``$ALLOT_TLS_CA`` (``allot.bus.tls``), else of the local ``allot up``."""
    identity_file = os.environ.get("ALLOT_IDENTITY")
    identity = load(Path(identity_file)) if identity_file else local_operator()
    tls = from_environment()
    if tls is None:
        ca = local_up("tls_ca")
        tls = client_context(ca) if ca else None
    return identity, tls


async def connect(args: argparse.Namespace) -> "AsyncClient":
    """An ``AsyncClient``, connected as ``credentials`` say."""
    import nats.errors

    from allot.client.client import AsyncClient

    url = resolve_nats_url(args.nats_url)
    try:
        return await AsyncClient.connect(url, *credentials())
    except (IdentityError, TlsError) as error:
        raise SystemExit(f"allot: {error}") from None
    except (nats.errors.NoServersError, ConnectionError) as error:
        raise failures.unreachable(url) from error


@contextlib.contextmanager
def connected_once(args: argparse.Namespace) -> Iterator["Connection"]:
    """A connection for a command and its answer, without asyncio or nats-py
    (``allot.client.oneshot``), connected as ``credentials`` say. A connection that cannot
    be had, or is lost and cannot be had again, is said in one line."""
    from allot.client.oneshot import Connection, ServerError, UnsupportedUrl

    url = resolve_nats_url(args.nats_url)
    try:
        with Connection.open(url, *credentials()) as connection:
            yield connection
    except (IdentityError, TlsError, UnsupportedUrl) as error:
        raise SystemExit(f"allot: {error}") from None
    except ServerError as error:
        raise SystemExit(f"allot: the NATS server at {redacted(url)} said: {error}") from None
    except ConnectionError as error:
        raise failures.unreachable(url) from error
