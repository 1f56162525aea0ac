"""What every command service shares: decoding a request within bounds, field errors, and
one reply to every request, whatever its handler does."""

import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import msgspec
from nats.aio.msg import Msg

from allot.proto.commands import FieldError, decode_problem, unknown_field
from allot.proto.limits import MAX_REQUEST_BYTES, SHOWN_CHARS, check_json, shown
from allot.proto.subjects import ADMIN, IMPORTED_REPLY, inbox_prefix, sender_and_command

log = logging.getLogger("allot.commands")
Request = TypeVar("Request", bound=msgspec.Struct)
Handler = Callable[[bytes, "Sender"], Awaitable[msgspec.Struct]]
Reply = TypeVar("Reply", bound=msgspec.Struct)
MAX_ERRORS = 100  # a reply lists at most these, and says how many more there were
MESSAGE_CHARS = 1000  # of an error's message
DROPPED_EVERY_S = 10.0  # how often at most dropped messages are logged


class Refusal(msgspec.Struct, frozen=True, kw_only=True):
    """A reply with errors only: every reply of ``allot.proto.commands`` reads it, since
    their other fields all have defaults."""

    errors: list[FieldError]


class Sender(msgspec.Struct, frozen=True, kw_only=True):
    """Who sent a command, as its subject says: the server lets an identity send only under
    its own name, and ``admin.`` commands only if it is an operator."""

    principal: str
    operator: bool


def sender_of(msg: Msg) -> Sender | None:
    """The sender of a command, or None for a message that is no request of its sender:
    one whose replies would go anywhere but the sender's own inbox (or, for a user's, the
    server's route back to it from the users' account). A service that answered it would
    publish with its own rights where the sender may not: onto the log, say, or as another
    user's request (a stream consumer can deliver onto any subject)."""
    parsed = sender_and_command(msg.subject)
    if parsed is None or not msg.reply.startswith((inbox_prefix(parsed[0]) + ".", IMPORTED_REPLY)):
        return None
    principal, name = parsed
    return Sender(principal=principal, operator=name.startswith(ADMIN))


class _Dropped:
    """Messages dropped by ``answer``, logged at most every ``DROPPED_EVERY_S`` with how
    many there were: whoever can send a flood of them must not flood the log as well."""

    def __init__(self) -> None:
        self.since = 0  # dropped since the last line
        self.said_at = float("-inf")

    def count(self, subject: str) -> None:
        self.since += 1
        now = time.monotonic()
        if now - self.said_at >= DROPPED_EVERY_S:
            log.warning("dropped %d message(s), the last on %s: its reply subject is not its "
                        "sender's inbox", self.since, shown(subject, 300))  # fmt: skip
            self.since, self.said_at = 0, now


_dropped = _Dropped()


def refusal(field: str, value: str, message: str) -> Refusal:
    return Refusal(errors=[FieldError(field=field, value=value, message=message)])


def request_of(msg: Msg) -> Sender | None:
    """The sender of ``msg``, or None for a message that is no request of its sender
    (``sender_of``), to be dropped unanswered before it takes any room."""
    sender = sender_of(msg)
    if sender is None:
        _dropped.count(msg.subject)
    return sender


async def answer(msg: Msg, sender: Sender, handle: Handler, service: str) -> msgspec.Struct:
    """Reply to ``msg`` with what ``handle`` makes of it, and return that; a handler that
    raises is logged and answered with the error, so no request goes unanswered or stops
    the service."""
    try:
        reply = await handle(msg.data, sender)
    except Exception as error:
        log.exception("%s failed on a request to %s", service, msg.subject)
        reply = refusal("request", "", f"the {service} failed on it: {error!r}")
    await respond(msg, reply)
    return reply


async def respond(msg: Msg, reply: msgspec.Struct) -> None:
    with contextlib.suppress(Exception):  # a request without a reply subject, or gone
        await msg.respond(msgspec.json.encode(bounded(reply)))


def bounded(reply: Reply) -> Reply:
    """``reply`` as it may be sent: the strings it repeats from the request cut (an id of
    100 kB is refused, not echoed), and its errors cut to the first ``MAX_ERRORS``. Every
    reply stays far below NATS's payload limit whatever the request was."""
    cut: dict[str, object] = {
        field: shown(value)
        for field in reply.__struct_fields__
        if isinstance(value := getattr(reply, field), str) and len(value) > SHOWN_CHARS
    }
    errors: list[FieldError] | None = getattr(reply, "errors", None)
    if errors:
        kept = [
            FieldError(
                field=shown(e.field), value=shown(e.value), message=shown(e.message, MESSAGE_CHARS)
            )
            for e in errors[:MAX_ERRORS]
        ]
        if len(errors) > MAX_ERRORS:
            more = len(errors) - MAX_ERRORS
            kept.append(
                FieldError(
                    field="errors",
                    value=f"{len(errors)} errors",
                    message=f"{more} more not shown: correct these and send it again",
                )
            )
        cut["errors"] = kept
    return msgspec.structs.replace(reply, **cut) if cut else reply


def decode_request(payload: bytes, kind: type[Request]) -> Request | FieldError:
    """The request, or the field error that says why it is not one. Size and nesting are
    checked before decoding; nothing a client sends raises here."""
    try:
        check_json(payload, MAX_REQUEST_BYTES)
    except msgspec.DecodeError as error:  # too large or too deep to decode at all
        return decode_problem(error, None, kind)
    try:
        request = msgspec.json.decode(payload, type=kind)
        return unknown_field(msgspec.json.decode(payload), kind) or request
    except msgspec.DecodeError as error:
        failure: Exception = error
    except Exception as error:
        failure = error
    try:
        if isinstance(failure, msgspec.DecodeError):
            given = _untyped(payload)  # a field it lacks is what to say first, if any
            return unknown_field(given, kind) or decode_problem(failure, given, kind)
    except Exception as error:  # a bug in saying why must not cost the service or the reply
        failure = error
    return FieldError(field="request", value="", message=f"cannot decode: {failure!r}")


def _untyped(payload: bytes) -> object:
    """The request decoded as plain JSON, to show the value a field got; None where even
    that fails (it is no JSON, or holds what no Python value is, such as a lone surrogate)."""
    try:
        return msgspec.json.decode(payload)
    except msgspec.DecodeError:
        return None


def not_stored(error: Exception) -> FieldError:
    """The log did not take the command; the client retries (safely: ids are fixed)."""
    return FieldError(field="log", value="", message=f"not stored, retry: {error}")
