"""Every subject name and the stream configuration, in one place.

Events live under ``allot.evt.`` in the ALLOT stream; commands (request/reply) under
``allot.cmd.``; heartbeats and other high-rate samples under ``allot.hb.``, outside the log.
"""

import re
from typing import Final

import msgspec

from allot.proto.events import (
    AccountEvent,
    AccountsApplied,
    Event,
    EventQuarantined,
    JobEvent,
    NodeEvent,
    PlanComputed,
    PolicyAdopted,
)
from allot.proto.limits import MAX_EVENT_BYTES

STREAM: Final = "ALLOT"
EVENTS_PREFIX: Final = "allot.evt"
ALL_EVENTS: Final = f"{EVENTS_PREFIX}.>"
PLAN_EVENTS: Final = f"{EVENTS_PREFIX}.plan.>"
LOG_EVENTS: Final = f"{EVENTS_PREFIX}.log.>"  # what operators say about the log itself

SUBMIT: Final = "allot.cmd.submit"
CANCEL: Final = "allot.cmd.cancel"
NODE_COMMAND: Final = "allot.cmd.node"
ACCOUNTS_APPLY: Final = "allot.cmd.accounts.apply"
BUDGET_GRANT: Final = "allot.cmd.budget.grant"
HEARTBEATS: Final = "allot.hb.*"

# A token of a subject: no dots, wildcards or whitespace. Job and node ids are tokens.
_TOKEN = re.compile(r"^[A-Za-z0-9_-]+$")
MAX_ID = 128  # characters of a job or node id


def is_id(value: str) -> bool:
    """Whether ``value`` can be a job or node id: a subject token of at most ``MAX_ID``."""
    return len(value) <= MAX_ID and _TOKEN.match(value) is not None


class StreamSettings(msgspec.Struct, frozen=True, kw_only=True):
    """How the log is stored. Duplicate submissions within the window are dropped by the
    server; older retries are caught by the intake's own idempotency index."""

    name: str = STREAM
    subjects: tuple[str, ...] = (ALL_EVENTS,)
    duplicate_window_s: float = 600.0
    max_msg_size: int = MAX_EVENT_BYTES


def health(service: str) -> str:
    """Where a command service answers once it has read the log (readiness)."""
    return f"allot.cmd.health.{_token(service)}"


def heartbeat(node_id: str) -> str:
    return f"allot.hb.{_token(node_id)}"


def subject_for(event: Event) -> str:
    """The subject an event is appended under: by entity, then by type."""
    tag = type(event).__struct_config__.tag
    if isinstance(event, JobEvent):
        return f"{EVENTS_PREFIX}.job.{_token(event.job_id)}.{tag}"
    if isinstance(event, NodeEvent):
        return f"{EVENTS_PREFIX}.node.{_token(event.node_id)}.{tag}"
    if isinstance(event, AccountEvent):
        tokens = ".".join(_token(segment) for segment in event.path.split("/"))
        return f"{EVENTS_PREFIX}.account.{tokens}.{tag}"
    if isinstance(event, AccountsApplied):
        # Among the account events (a path's segments are lower case, the tag is not).
        return f"{EVENTS_PREFIX}.account.{tag}"
    if isinstance(event, PlanComputed | PolicyAdopted):
        return f"{EVENTS_PREFIX}.plan.{tag}"
    if isinstance(event, EventQuarantined):
        return f"{EVENTS_PREFIX}.log.{tag}"
    raise TypeError(f"no subject for event type {type(event).__name__}")


def _token(value: str) -> str:
    if not _TOKEN.match(value):
        raise ValueError(f"{value!r} cannot be a subject token (letters, digits, '_' and '-')")
    return value
