"""How a command of the ``allot`` command line reaches Allot, and says what it found: the
NATS server ``allot up`` left word of (or the one named), as whom, and output as a table
for people or JSON for scripts."""

import argparse
import contextlib
import json
import os
from pathlib import Path
from typing import Any

import nats.errors

from allot.bus.identity import Identity, IdentityError, load
from allot.bus.tls import CA_ENV, TlsError, client_context
from allot.client import failures
from allot.client.client import AsyncClient


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


async def connect(args: argparse.Namespace) -> AsyncClient:
    """As ``$ALLOT_IDENTITY`` (AsyncClient reads it), else as the local operator; over the
    TLS of ``$ALLOT_TLS_CA`` (AsyncClient reads it), else of the local ``allot up``."""
    url = resolve_nats_url(args.nats_url)
    try:
        identity = None if os.environ.get("ALLOT_IDENTITY") else local_operator()
        ca = None if os.environ.get(CA_ENV) else local_up("tls_ca")
        tls = client_context(ca) if ca else None
        return await AsyncClient.connect(url, identity, tls)
    except (IdentityError, TlsError) as error:
        raise SystemExit(f"allot: {error}") from None
    except (nats.errors.NoServersError, ConnectionError) as error:
        raise failures.unreachable(url) from error
