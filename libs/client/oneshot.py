"""One NATS connection for a command and its answer, without asyncio or nats-py: a
command line that submits a job and leaves spent most of its life loading those two
(docs/adr/0039). It speaks the part of the NATS client protocol a request needs (INFO,
CONNECT signed by the identity's nkey, TLS, PING/PONG, SUB/UNSUB, PUB/HPUB, MSG/HMSG and
-ERR); whatever waits, watches or reads the log stays with ``AsyncClient`` and nats-py.
What a command's subject is, when it is sent again and what its errors mean comes from
``allot.client.sending``, as for ``AsyncClient``."""

import base64
import json
import os
import socket
import ssl
import time
from collections.abc import Callable
from typing import Annotated, Any, Final, TypeVar
from urllib.parse import urlsplit

import msgspec

from allot.bus import traced
from allot.bus.identity import Identity, IdentityError
from allot.bus.tls import TlsError
from allot.bus.urls import redacted, servers
from allot.client.render import printable
from allot.client.sending import (
    CANCEL_ATTEMPTS,
    CANCEL_TIMEOUT_S,
    PUBLISH_REFUSED,
    SERVICE_OF,
    SUBMIT_ATTEMPTS,
    SUBMIT_TIMEOUT_S,
    CommandError,
    NoAnswer,
    PayloadTooLarge,
    Retries,
    done_already,
    local_principal,
    not_admitted,
    not_allowed,
    subject,
    submission,
    submit_span,
    untrusted,
)
from allot.proto.commands import CancelReply, CancelRequest, SubmitReply
from allot.proto.events import ArrayTasks, JobSpec
from allot.proto.subjects import inbox_prefix

R = TypeVar("R", SubmitReply, CancelReply)

CONNECT_TIMEOUT_S: Final = 2.0  # each step: TCP, INFO, TLS handshake, CONNECT (as nats-py)
# How long the servers are tried again while none takes the connection: `allot up` restarts
# its own in 0.5 s, and nats-py waited 2 s each of three times.
CONNECT_PATIENCE_S: Final = 6.0
SEND_TIMEOUT_S: Final = 5.0
MAX_LINE: Final = 1 << 20  # a control line: an INFO lists a cluster's members
MAX_REPLY_BYTES: Final = 1 << 20  # a reply to one command is far smaller
MAX_PAYLOAD: Final = 64 << 20  # nats-server takes no larger max_payload
DEFAULT_PORT: Final = 4222
SCHEMES: Final = ("nats", "tls")
# What may come from a server while a request waits; anything else is no NATS.
_OPERATIONS: Final = frozenset((b"MSG", b"HMSG", b"PING", b"PONG", b"+OK", b"-ERR", b"INFO"))


class ServerInfo(msgspec.Struct):
    """What of a server's INFO a request needs."""

    max_payload: Annotated[int, msgspec.Meta(ge=1)] = 1 << 20
    nonce: str | None = None  # to be signed, where the server authorizes by nkeys
    tls_required: bool = False


class UnsupportedUrl(ValueError):
    """A server's URL the command line cannot connect to."""


class Silence(Exception):
    """Nothing came in time."""


class NoResponders(Exception):
    """The server says nobody takes requests on the subject."""


class Refused(Exception):
    """The server refused this identity the subject a request was sent on."""


class ServerError(Exception):
    """The server said -ERR for something else, or sent what is no NATS protocol."""


class NotAdmitted(Exception):
    """The server does not admit this identity."""


class Connection:
    """Connected as ``principal``; replies come to its inbox, where only it may listen."""

    def __init__(self, url: str, identity: Identity | None, tls: ssl.SSLContext | None):
        self.url = url
        self.identity = identity
        self.tls = tls
        self.principal = identity.name if identity is not None else local_principal()
        self.operator = identity.operator if identity is not None else True
        self._sock: socket.socket | None = None
        self._buffer = bytearray()
        self._sid = 0
        self._inbox = f"{inbox_prefix(self.principal)}.{os.urandom(8).hex()}"
        self.max_payload = 1 << 20  # until the server's INFO says

    @classmethod
    def open(
        cls, url: str, identity: Identity | None = None, tls: ssl.SSLContext | None = None
    ) -> "Connection":
        """Connected to the first of ``url``'s servers that takes the connection; raises
        ConnectionError where none does, TlsError where a TLS handshake fails,
        IdentityError where no server admits ``identity``, and UnsupportedUrl for a URL of
        another kind than nats:// and tls://."""
        for server in servers(url):
            scheme = server.partition("://")[0] if "://" in server else "nats"
            if scheme not in SCHEMES:
                raise UnsupportedUrl(
                    f"{redacted(server)}: the command line connects by nats:// or tls://"
                )
        connection = cls(url, identity, tls)
        connection._connect()
        return connection

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    # --- commands -----------------------------------------------------------------------

    def submit(
        self, spec: JobSpec, *, idempotency_key: str | None = None, array: ArrayTasks | None = None
    ) -> SubmitReply:
        """Submit a job, or with ``array`` a job array, as ``AsyncClient.submit`` does;
        raises CommandError where it is refused."""
        payload = submission(spec, idempotency_key, array)
        with traced.client_span("allot.submit", submit_span(spec)) as span:
            reply = self.ask("submit", payload, SubmitReply, SUBMIT_TIMEOUT_S, SUBMIT_ATTEMPTS)
            if span is not None and reply.job_id is not None:
                span.set_attribute("allot.job.id", reply.job_id)
        if reply.errors:
            raise CommandError(reply.errors)
        return reply

    def cancel(self, job_id: str, reason: str = "") -> CancelReply:
        """Cancel a job, as ``AsyncClient.cancel`` does."""
        payload = msgspec.json.encode(CancelRequest(job_id=job_id, reason=reason))
        reply = self.ask(
            "cancel", payload, CancelReply, CANCEL_TIMEOUT_S, CANCEL_ATTEMPTS, retried=done_already
        )
        if reply.errors:
            raise CommandError(reply.errors)
        return reply

    def ask(
        self,
        name: str,
        payload: bytes,
        reply_type: type[R],
        timeout: float,
        attempts: int,
        retried: Callable[[R], R] | None = None,
    ) -> R:
        """The answer to the command ``name``, sent again as ``Retries`` say (``retried``:
        what a reply to one sent again means); raises NoAnswer where nothing answered,
        PayloadTooLarge where the server would not take it, CommandError where the
        server does not let this identity send it."""
        to = subject(self.principal, self.operator, name)
        if len(payload) > self.max_payload:
            raise PayloadTooLarge(name, len(payload), self.max_payload)
        headers = traced.carry({})
        retries = Retries(attempts, timeout, time.monotonic())
        while True:
            try:
                data = self._request(to, payload, headers, timeout)
            except (Silence, NoResponders, ConnectionError, ssl.SSLError) as error:
                delay = retries.after_silence()
                if delay is None:
                    waited = None if isinstance(error, NoResponders) else timeout
                    raise NoAnswer(SERVICE_OF[name], to, waited) from None
                time.sleep(delay)
                if not isinstance(error, NoResponders):
                    # Lost, or cut off inside a message: connect again, in step.
                    self.close()
                    self._connect()
                continue
            except Refused:
                raise CommandError([not_allowed(self.principal, to)]) from None
            try:
                reply: R = msgspec.json.decode(data, type=reply_type)
            except msgspec.DecodeError as error:  # validation errors too
                raise ServerError(f"a reply that is no {reply_type.__name__}: {error}") from None
            delay = retries.after_reply(reply.errors, time.monotonic())
            if delay is None:
                return retried(reply) if retried is not None and retries.attempt > 0 else reply
            time.sleep(delay)

    # --- the protocol -------------------------------------------------------------------

    def _connect(self) -> None:
        """To the first server of the list that admits this identity. While none is there
        to take the connection (one restarting), the list is tried again, for up to
        CONNECT_PATIENCE_S; not where one that answered spoke no NATS."""
        give_up = time.monotonic() + CONNECT_PATIENCE_S
        wait = 0.1
        while True:
            unreachable: list[str] = []
            refused = no_nats = False
            for server in servers(self.url):
                try:
                    self._connect_to(server)
                    return
                except ssl.SSLError as error:  # a handshake, or a certificate refused after
                    self.close()
                    raise TlsError(untrusted(self.url, error, self.tls)) from None
                except NotAdmitted:  # this one's configuration may be behind the others'
                    self.close()
                    refused = True
                except (OSError, Silence, ServerError) as error:
                    self.close()
                    no_nats = no_nats or isinstance(error, ServerError)
                    unreachable.append(f"{redacted(server)}: {error}")
            if refused:
                raise IdentityError(
                    not_admitted(self.url, self.principal, self.identity is not None)
                )
            if no_nats or time.monotonic() + wait > give_up:
                raise ConnectionError("; ".join(unreachable) or "no server named")
            time.sleep(wait)
            wait = min(1.0, wait * 2)

    def _connect_to(self, server: str) -> None:
        address = urlsplit(server if "://" in server else f"nats://{server}")
        try:
            host, port = address.hostname or "localhost", address.port or DEFAULT_PORT
        except ValueError as error:  # a port that is no number
            raise ServerError(str(error)) from None
        self._buffer.clear()
        self._sock = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        op, info_line = self._line(time.monotonic() + CONNECT_TIMEOUT_S).partition(b" ")[::2]
        if op.upper() != b"INFO":
            raise ServerError(f"no INFO from the server but {op[:40]!r}")
        try:
            info = msgspec.json.decode(info_line, type=ServerInfo)
        except (msgspec.DecodeError, RecursionError) as error:
            raise ServerError(f"an INFO that is no server's: {str(error)[:200]}") from None
        self.max_payload = min(info.max_payload, MAX_PAYLOAD)
        if info.tls_required or address.scheme == "tls":
            self._handshake(host)
        deadline = time.monotonic() + CONNECT_TIMEOUT_S
        connect: dict[str, Any] = {
            "verbose": False, "pedantic": False, "lang": "python3", "version": "allot",
            "protocol": 1, "name": "allot-client", "headers": True, "no_responders": True,
        }  # fmt: skip
        if self.identity is not None and info.nonce is not None:
            signature = self.identity.sign(info.nonce.encode())
            connect["nkey"] = self.identity.public_key
            connect["sig"] = base64.urlsafe_b64encode(signature).rstrip(b"=").decode()
        elif address.username is not None:  # nats://user:password@host or nats://token@host
            if address.password is None:
                connect["auth_token"] = address.username
            else:
                connect["user"], connect["pass"] = address.username, address.password
        self._send(b"CONNECT " + json.dumps(connect).encode() + b"\r\nPING\r\n")
        while True:
            op, rest = self._line(deadline).partition(b" ")[::2]
            if op.upper() == b"PONG":
                return
            if op.upper() == b"-ERR":
                message = _said(rest)
                if "authorization violation" in message.lower():
                    raise NotAdmitted(message)
                raise ServerError(message)

    def _handshake(self, host: str) -> None:
        assert self._sock is not None
        context = self.tls or ssl.create_default_context()
        self._sock = context.wrap_socket(self._sock, server_hostname=host)

    def _request(self, to: str, payload: bytes, headers: dict[str, str], timeout: float) -> bytes:
        """The payload of the first reply; raises Silence, NoResponders or Refused."""
        self._sid += 1
        sid = str(self._sid)
        inbox = f"{self._inbox}.{sid}"
        out = f"SUB {inbox} {sid}\r\nUNSUB {sid} 1\r\n".encode()
        if headers:  # a trace context (allot.bus.traced)
            head = ("NATS/1.0\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
                    + "\r\n").encode()  # fmt: skip
            sizes = f"{len(head)} {len(head) + len(payload)}"
            out += f"HPUB {to} {inbox} {sizes}\r\n".encode() + head + payload + b"\r\n"
        else:
            out += f"PUB {to} {inbox} {len(payload)}\r\n".encode() + payload + b"\r\n"
        self._send(out)
        deadline = time.monotonic() + timeout
        while True:
            op, rest = self._line(deadline).partition(b" ")[::2]
            op = op.upper()
            if op not in _OPERATIONS:
                raise ServerError(f"{op[:40]!r}, which is no NATS operation")
            if op in (b"MSG", b"HMSG"):
                # MSG <subject> <sid> [reply-to] <size>; HMSG … <header size> <size>
                fields = rest.split()
                least = 3 if op == b"MSG" else 4
                try:
                    if not least <= len(fields) <= least + 1:
                        raise ValueError
                    size = int(fields[-1])
                    head_size = int(fields[-2]) if op == b"HMSG" else 0
                except ValueError:
                    raise ServerError(f"a malformed {op.decode()} line") from None
                if not 0 <= head_size <= size <= MAX_REPLY_BYTES:
                    raise ServerError(f"a {op.decode()} of {size} bytes")
                body = self._exactly(size + 2, deadline)[:size]
                if fields[1] != sid.encode():
                    continue  # a late answer to a request sent earlier
                if body[:head_size].startswith(b"NATS/1.0 503"):
                    raise NoResponders
                return body[head_size:]
            if op == b"PING":
                self._send(b"PONG\r\n")
            elif op == b"-ERR":
                message = _said(rest)
                refused = PUBLISH_REFUSED.search(message)
                if refused and refused[1].lower() == to.lower():
                    raise Refused(to)
                raise ServerError(message)
            # +OK, PONG, and an INFO that a cluster's members changed: nothing to do

    def _send(self, data: bytes) -> None:
        if self._sock is None:
            raise ConnectionError("not connected")
        self._sock.settimeout(SEND_TIMEOUT_S)
        try:
            self._sock.sendall(data)
        except ssl.SSLError:
            raise
        except OSError as error:
            raise ConnectionError(f"the connection to NATS broke: {error}") from None

    def _line(self, deadline: float) -> bytes:
        while (end := self._buffer.find(b"\r\n")) < 0:
            if len(self._buffer) > MAX_LINE:
                raise ServerError(f"a line of over {MAX_LINE} bytes")
            self._fill(deadline)
        line = bytes(self._buffer[:end])
        del self._buffer[: end + 2]
        return line

    def _exactly(self, size: int, deadline: float) -> bytes:
        while len(self._buffer) < size:
            self._fill(deadline)
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data

    def _fill(self, deadline: float) -> None:
        if self._sock is None:
            raise ConnectionError("not connected")
        left = deadline - time.monotonic()
        if left <= 0:
            raise Silence
        self._sock.settimeout(left)
        try:
            chunk = self._sock.recv(1 << 16)
        except TimeoutError:
            raise Silence from None
        except ssl.SSLError:
            raise
        except OSError as error:
            raise ConnectionError(f"the connection to NATS broke: {error}") from None
        if not chunk:
            raise ConnectionError("the NATS server closed the connection")
        self._buffer += chunk


def _said(error: bytes) -> str:
    """The text of a server's -ERR, as a terminal may show it."""
    return printable(error.decode(errors="replace").strip(" '"))[:500]
