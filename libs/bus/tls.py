"""TLS for NATS connections, from the standard files: a CA, a certificate and its key.

The server presents its certificate to every client and route; a client checks it against
the CA it is given and, where the server asks for one (``verify``), presents its own.
Identities stay the nkeys of ``allot.bus.identity``: TLS keeps the wire private and proves
the server is the one meant, it does not say who a client is.

Clients read their files from ``ALLOT_TLS_CA`` (and ``ALLOT_TLS_CERT`` with
``ALLOT_TLS_KEY`` for a server that verifies clients). ``allot.bus.local_ca`` makes a CA and
a server certificate for one machine (``allot up --tls``); production brings its own
(``deploy/``).
"""

import logging
import os
import ssl
from typing import Any

import msgspec

CA_ENV = "ALLOT_TLS_CA"
CERT_ENV = "ALLOT_TLS_CERT"
KEY_ENV = "ALLOT_TLS_KEY"


class TlsError(Exception):
    """A TLS file that is missing or not what it should be; the message says which."""


class ServerTls(msgspec.Struct, frozen=True, kw_only=True):
    """A server's TLS files; with ``verify``, it also asks each client for a certificate
    the CA signed."""

    ca: str
    cert: str
    key: str
    verify: bool = False

    @classmethod
    def from_config(cls, block: dict[str, Any]) -> "ServerTls":
        """The files a server config's ``tls`` block names."""
        return cls(
            ca=block["ca_file"], cert=block["cert_file"], key=block["key_file"],
            verify=bool(block.get("verify")),
        )  # fmt: skip

    def config(self) -> dict[str, Any]:
        """The ``tls`` block of a nats-server config."""
        return {
            "ca_file": self.ca,
            "cert_file": self.cert,
            "key_file": self.key,
            "verify": self.verify,
            "timeout": 5,  # seconds for the handshake; loaded machines need more than 0.5
        }


class _HalfCloseNotice(logging.Filter):
    """asyncio warns at each TLS connection's end that its protocol (nats-py's) would keep
    the connection half open, which TLS cannot do; nothing is wrong, and a warning per
    connection would drown what is."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "eof_received()" not in record.getMessage()


def client_context(ca: str, cert: str | None = None, key: str | None = None) -> ssl.SSLContext:
    """A context that trusts only ``ca`` and, given them, presents ``cert`` and ``key``."""
    asyncio_log = logging.getLogger("asyncio")
    if not any(isinstance(f, _HalfCloseNotice) for f in asyncio_log.filters):
        asyncio_log.addFilter(_HalfCloseNotice())
    try:
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=ca)
        if cert is not None:
            context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as error:
        raise TlsError(f"cannot use the TLS files ({ca}, {cert}, {key}): {error}") from None
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


def from_environment() -> ssl.SSLContext | None:
    """The client context ``ALLOT_TLS_*`` describe; None where ``ALLOT_TLS_CA`` is unset."""
    ca = os.environ.get(CA_ENV)
    if not ca:
        return None
    cert, key = os.environ.get(CERT_ENV) or None, os.environ.get(KEY_ENV) or None
    if (cert is None) != (key is None):
        raise TlsError(f"set both {CERT_ENV} and {KEY_ENV}, or neither")
    return client_context(ca, cert, key)
