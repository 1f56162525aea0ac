"""What sending a command to Allot means, whichever connection sends it (``AsyncClient``,
or the command line's ``allot.client.oneshot``): the subject it goes on, the errors it can
end in, and when it is sent again. Nothing here loads asyncio or nats-py."""

import getpass
import os
import re
import ssl
from collections.abc import Sequence
from typing import Final

import msgspec

from allot.bus.permissions import ANSWERS
from allot.bus.tls import CA_ENV, CERT_ENV, KEY_ENV
from allot.bus.urls import redacted
from allot.core.model import JobStatus
from allot.core.validate import already_ended
from allot.proto.commands import CancelReply, FieldError, SubmitRequest
from allot.proto.events import ArrayTasks, JobSpec
from allot.proto.subjects import ADMIN, MAX_PRINCIPAL, command

SUBMIT_TIMEOUT_S: Final = 5.0  # how long a submission waits for its answer, each time it is sent
SUBMIT_ATTEMPTS: Final = 5  # and how often it is sent: its idempotency key makes that safe
CANCEL_TIMEOUT_S: Final = 5.0
CANCEL_ATTEMPTS: Final = 3  # a cancel sent again is harmless (done_already)

# Who answers each command and query, by its name in the subject.
SERVICE_OF: Final = {name: service for service, names in ANSWERS.items() for name in names}

# The server's -ERR, as nats-py writes it (in lower case) and as it comes on the wire.
PUBLISH_REFUSED: Final = re.compile(r'permissions violation for publish to "([^"]+)"', re.I)


class CommandError(Exception):
    """The intake refused a command; ``errors`` name each field and what is accepted."""

    def __init__(self, errors: list[FieldError]):
        super().__init__("; ".join(str(e) for e in errors))
        self.errors = errors


class NoAnswer(Exception):
    """Nothing answered a command: the service behind its subject is not running, or is
    too busy to answer in time."""

    def __init__(self, service: str, subject: str, timeout: float | None):
        why = "no responders" if timeout is None else f"no reply within {timeout:g}s"
        super().__init__(f"the {service} service did not answer on {subject} ({why})")
        self.service, self.subject, self.timeout = service, subject, timeout


class PayloadTooLarge(Exception):
    """A command larger than the NATS server takes in one message (its max_payload)."""

    def __init__(self, command: str, size: int, limit: int):
        super().__init__(f"{command}: {size} bytes, over the limit of {limit}")
        self.command, self.size, self.limit = command, size, limit


class WaitTimedOut(TimeoutError):
    """``wait`` gave up before the job ended; ``status`` is where the job was then."""

    def __init__(self, job_id: str, status: str, timeout: float):
        super().__init__(f"{job_id} still {status} after {timeout:g}s")
        self.job_id, self.status, self.timeout = job_id, status, timeout


def subject(principal: str, operator: bool, name: str) -> str:
    """The subject ``principal`` sends the command ``name`` on: a command anyone may send
    goes as an operator's where ``principal`` is one."""
    if operator and not name.startswith(ADMIN):
        name = ADMIN + name
    return command(principal, name)


def submission(spec: JobSpec, idempotency_key: str | None, array: ArrayTasks | None) -> bytes:
    """A ``SubmitRequest``, encoded; with an idempotency key made up where none is given,
    so that it can be sent again without ever being stored twice."""
    key = idempotency_key or os.urandom(16).hex()
    return msgspec.json.encode(SubmitRequest(spec=spec, idempotency_key=key, array=array))


def submit_span(spec: JobSpec) -> dict[str, str | int | bool]:
    """The attributes of a submission's span, where its trace begins."""
    return {"allot.account": spec.account, "allot.tier": spec.tier, "allot.gpus": spec.gpus}


class Retries:
    """When a command is sent again, and after how long. Silence (nothing answered, or
    not in time) is tried ``attempts`` times in all. A log that cannot store for now is
    asked again for as long as the attempts could have waited on a silent service: a
    cluster electing the log's leader answers "retry" at once, for up to ten seconds
    (docs/adr/0023). The waits double from 0.1 s up to 2 s."""

    def __init__(self, attempts: int, timeout: float, now: float):
        self.attempts = attempts
        self.patience = now + attempts * timeout
        self.attempt = 0  # how many times it was sent again

    def after_silence(self) -> float | None:
        """How long to wait before sending it again; None: no more tries."""
        if self.attempt >= self.attempts - 1:
            return None
        return self._next()

    def after_reply(self, errors: Sequence[FieldError], now: float) -> float | None:
        """How long to wait before sending it again, where the reply says the log could
        not store it; None: the reply is the answer."""
        waiting = self.attempt < self.attempts - 1 or now < self.patience
        if retryable(errors) and self.attempts > 1 and waiting:
            return self._next()
        return None

    def _next(self) -> float:
        delay = min(2.0, 0.1 * 2.0**self.attempt)
        self.attempt += 1
        return delay


def done_already(reply: CancelReply) -> CancelReply:
    """A cancel sent again that finds the job cancelled: an earlier try was stored and its
    answer lost (or someone else cancelled it); either way, what was asked for is done."""
    done = already_ended(JobStatus.CANCELLED)
    if reply.errors and all(e.field == "job_id" and e.message == done for e in reply.errors):
        return CancelReply(job_id=reply.job_id)
    return reply


def retryable(errors: Sequence[FieldError]) -> bool:
    """Whether a refusal says only that the log could not store it for now."""
    return any(e.field == "log" for e in errors)


def not_allowed(principal: str, subject: str) -> FieldError:
    name = subject.split(".", 3)[-1]
    return FieldError(
        field="principal",
        value=principal,
        message=f"the NATS server does not let {principal} send {name}: it takes an operator "
        "identity (`allot users add NAME --admin`)",
    )


def local_principal() -> str:
    """Who the local user is, as a principal: for a server without authorization."""
    name = re.sub(r"[^A-Za-z0-9_-]", "_", getpass.getuser())[:MAX_PRINCIPAL]
    return name or "anonymous"


def not_admitted(url: str, principal: str, has_identity: bool) -> str:
    """Why a server refused to let this client connect, and what to do about it."""
    who = f"the identity {principal!r}" if has_identity else "a client without an identity"
    return (
        f"the NATS server at {redacted(url)} does not admit {who}: ask its operator "
        "for one (`allot users add NAME`) and set ALLOT_IDENTITY to its file"
    )


def untrusted(url: str, error: ssl.SSLError, tls: ssl.SSLContext | None) -> str:
    """Why a TLS handshake failed, and what to do about it."""
    if tls is None or isinstance(error, ssl.SSLCertVerificationError):
        fix = f"set {CA_ENV} to the file of the CA that signed the server's certificate"
    elif "CERTIFICATE_REQUIRED" in str(error.reason):
        fix = f"it asks for a client certificate: set {CERT_ENV} and {KEY_ENV} to yours"
    else:
        fix = f"check {CA_ENV}, {CERT_ENV} and {KEY_ENV}"
    return f"TLS with the NATS server at {redacted(url)} failed ({error.reason or error}): {fix}"
