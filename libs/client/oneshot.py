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
from typing import Any, Final, TypeVar
from urllib.parse import urlsplit

import msgspec

from allot.bus import traced
from allot.bus.identity import Identity, IdentityError
from allot.bus.tls import TlsError
from allot.bus.urls import redacted, servers
from allot.client.sending import (
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

CONNECT_TIMEOUT_S: Final = 5.0  # for the TCP connection, the TLS handshake and CONNECT
MAX_LINE: Final = 1 << 20  # a control line: an INFO lists a cluster's members; no MSG is longer
DEFAULT_PORT: Final = 4222


class Silence(Exception):
    """Nothing came in time."""


class NoResponders(Exception):
    """The server says nobody takes requests on the subject."""


class Refused(Exception):
    """The server refused this identity the subject a request was sent on."""


class ServerError(Exception):
    """The server said -ERR for something else, or sent what is no NATS protocol."""


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
        ConnectionError where none does, TlsError where a TLS handshake fails, and
        IdentityError where a server does not admit ``identity``."""
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
        reply = self.ask("cancel", payload, CancelReply, 5.0, 3, retried=done_already)
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
                if not isinstance(error, Silence | NoResponders):  # lost: connect again
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
        unreachable: list[str] = []
        for server in servers(self.url):
            try:
                self._connect_to(server)
                return
            except ssl.SSLError as error:  # a handshake, or a certificate refused after it
                self.close()
                raise TlsError(untrusted(self.url, error, self.tls)) from None
            except (OSError, ValueError, Silence, ServerError) as error:  # none, or no NATS
                self.close()
                unreachable.append(f"{redacted(server)}: {error}")
        raise ConnectionError("; ".join(unreachable) or "no server named")

    def _connect_to(self, server: str) -> None:
        address = urlsplit(server if "://" in server else f"nats://{server}")
        if address.scheme not in ("nats", "tls"):
            raise ServerError(f"{address.scheme}:// is not for the command line: use nats://")
        host, port = address.hostname or "localhost", address.port or DEFAULT_PORT
        deadline = time.monotonic() + CONNECT_TIMEOUT_S
        self._buffer.clear()
        self._sock = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        op, info_line = self._line(deadline).partition(b" ")[::2]
        if op.upper() != b"INFO":
            raise ServerError(f"no INFO from the server but {op[:40]!r}")
        info: dict[str, Any] = json.loads(info_line)
        self.max_payload = int(info.get("max_payload", self.max_payload))
        if info.get("tls_required") or address.scheme == "tls":
            self._handshake(host)
        connect: dict[str, Any] = {
            "verbose": False, "pedantic": False, "lang": "python3", "version": "allot",
            "protocol": 1, "name": "allot-client", "headers": True, "no_responders": True,
        }  # fmt: skip
        if self.identity is not None and "nonce" in info:
            signature = self.identity.sign(info["nonce"].encode())
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
                message = rest.decode(errors="replace").strip(" '")
                if "authorization violation" in message.lower():
                    raise IdentityError(
                        not_admitted(self.url, self.principal, self.identity is not None)
                    )
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
            if op in (b"MSG", b"HMSG"):
                fields = rest.split()
                try:
                    size = int(fields[-1])
                    head_size = int(fields[-2]) if op == b"HMSG" else 0
                except (IndexError, ValueError):
                    raise ServerError(f"a malformed {op.decode()} line") from None
                if not 0 <= head_size <= size <= self.max_payload + MAX_LINE:
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
                message = rest.decode(errors="replace").strip(" '")
                refused = PUBLISH_REFUSED.search(message)
                if refused and refused[1].lower() == to.lower():
                    raise Refused(to)
                raise ServerError(message)
            # +OK, PONG, and an INFO that a cluster's members changed: nothing to do

    def _send(self, data: bytes) -> None:
        if self._sock is None:
            raise ConnectionError("not connected")
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
