"""Every subject name and the stream configuration, in one place.

Events live under ``allot.evt.`` in the ALLOT stream; commands (request/reply) under
``allot.cmd.<principal>.``; readiness under ``allot.health.``; heartbeats and other
high-rate samples under ``allot.hb.``, outside the log; a job's output, which each node
agent serves of the jobs it ran, under ``allot.output.<node>.<principal>`` (request/reply,
outside the log too).

A command's subject names who sends it, and the NATS server lets each identity publish
only under its own name and take replies only in its own inbox (``allot.bus.permissions``),
so the subject is the proof of the sender (docs/adr/0015). An operator's commands are under
``allot.cmd.<principal>.admin.``, which only operator identities may publish to.
"""

import re
from typing import Final

import msgspec

from allot.proto.events import (
    AccountEvent,
    AccountsApplied,
    Event,
    EventQuarantined,
    JobCancelled,
    JobCheckpointed,
    JobEvent,
    JobExited,
    JobsSubmitted,
    JobStarted,
    NodeEvent,
    PlanComputed,
    PolicyAdopted,
)
from allot.proto.limits import MAX_EVENT_BYTES

STREAM: Final = "ALLOT"
# What people read: a mirror of the log in their own NATS account, which nobody can write
# to (docs/adr/0015). It is fed through what the log's account exports for it.
MIRROR: Final = "ALLOT_RO"
MIRROR_API: Final = "$JS.CORE.API"  # the log's JetStream API, as the mirror's account sees it
MIRROR_DELIVER: Final = "allot.mirror"  # where the mirror's feed is delivered
SNAPSHOT_BUCKET: Final = "ALLOT_SNAPSHOTS"  # snapshots of the folded log (docs/adr/0024)
SNAPSHOT_STREAM: Final = f"OBJ_{SNAPSHOT_BUCKET}"  # the stream JetStream keeps the bucket in
READERS_API: Final = "$JS.READERS.API"  # the mirror's JetStream API, as users see it
EVENTS_PREFIX: Final = "allot.evt"
ALL_EVENTS: Final = f"{EVENTS_PREFIX}.>"
PLAN_EVENTS: Final = f"{EVENTS_PREFIX}.plan.>"
LOG_EVENTS: Final = f"{EVENTS_PREFIX}.log.>"  # what operators say about the log itself

COMMANDS_PREFIX: Final = "allot.cmd"
ADMIN: Final = "admin."  # an operator's commands: ``allot.cmd.<principal>.admin.<command>``
# Commands, as they follow the principal in a subject.
SUBMIT: Final = "submit"
SUBMIT_MANY: Final = "submit_many"  # several submissions in one request
CANCEL: Final = "cancel"
NODE_COMMAND: Final = "admin.node"
ACCOUNTS_APPLY: Final = "admin.accounts.apply"
BUDGET_GRANT: Final = "admin.budget.grant"
HEARTBEATS: Final = "allot.hb.*"
SAMPLES: Final = "allot.hb.samples.*"  # each GPU's load, per node (``allot.proto.telemetry``)
STATS: Final = "allot.stats.*"  # what services count that the log does not hold

# A token of a subject: no dots, wildcards or whitespace. Job and node ids are tokens.
_TOKEN = re.compile(r"^[A-Za-z0-9_-]+$")
MAX_ID = 128  # characters of a job or node id


MAX_PRINCIPAL = 64  # characters of an identity's name


def is_id(value: str) -> bool:
    """Whether ``value`` can be a job or node id: a subject token of at most ``MAX_ID``."""
    return len(value) <= MAX_ID and _TOKEN.fullmatch(value) is not None


def is_principal(name: str) -> bool:
    """Whether ``name`` can name an identity, whose commands are sent under it."""
    return len(name) <= MAX_PRINCIPAL and _TOKEN.fullmatch(name) is not None


LOG_REPLICAS = 3  # copies of the log a cluster keeps: one member may go, a quorum stays


class StreamSettings(msgspec.Struct, frozen=True, kw_only=True):
    """How the log is stored. Duplicate submissions within the window are dropped by the
    server; older retries are caught by the intake's own idempotency index. ``replicas``:
    the copies a JetStream cluster keeps (and the users' mirror of it); one server keeps
    one. It applies where the stream is made: a log made at one replica keeps one."""

    name: str = STREAM
    subjects: tuple[str, ...] = (ALL_EVENTS,)
    duplicate_window_s: float = 600.0
    max_msg_size: int = MAX_EVENT_BYTES
    replicas: int = 1


def health(service: str) -> str:
    """Where a command service answers once it has read the log (readiness)."""
    return f"allot.health.{_token(service)}"


def command(principal: str, name: str) -> str:
    """The subject ``principal`` sends the command ``name`` on."""
    return f"{COMMANDS_PREFIX}.{_token(principal)}.{name}"


def from_anyone(name: str) -> str:
    """The subject a service takes the command ``name`` on, whoever sends it."""
    return f"{COMMANDS_PREFIX}.*.{name}"


def sender_and_command(subject: str) -> tuple[str, str] | None:
    """``allot.cmd.alice.admin.node`` -> ``("alice", "admin.node")``; None if not a command."""
    prefix, _, rest = subject.partition(f"{COMMANDS_PREFIX}.")
    principal, _, name = rest.partition(".")
    if prefix or not name or not _TOKEN.fullmatch(principal):
        return None
    return principal, name


OUTPUT_PREFIX: Final = "allot.output"
OPERATOR_ASKS: Final = "admin"  # the last token of an operator's request for output


def output_request(node_id: str, principal: str, operator: bool) -> str:
    """Where ``principal`` asks ``node_id``'s agent for a job's output. Like a command,
    the subject names the asker, and only operators may send the ``.admin`` form."""
    subject = f"{OUTPUT_PREFIX}.{_token(node_id)}.{_token(principal)}"
    return f"{subject}.{OPERATOR_ASKS}" if operator else subject


def output_requests(node_id: str) -> str:
    """What ``node_id``'s agent takes requests for output on, whoever asks."""
    return f"{OUTPUT_PREFIX}.{_token(node_id)}.>"


def output_asker(subject: str, node_id: str) -> tuple[str, bool] | None:
    """``allot.output.node-1.alice.admin`` -> ``("alice", True)`` for node-1's agent; None
    for a subject that is no request for its output."""
    prefix, _, rest = subject.partition(f"{OUTPUT_PREFIX}.{node_id}.")
    principal, _, suffix = rest.partition(".")
    if prefix or not is_principal(principal) or suffix not in ("", OPERATOR_ASKS):
        return None
    return principal, suffix == OPERATOR_ASKS


def inbox_prefix(principal: str) -> str:
    """Where ``principal`` takes its replies; nobody else may subscribe there."""
    return f"_INBOX_{_token(principal)}"


# The reply subject of a request that came from another account through an import: the
# server makes it, and routes the reply back to the requester's own inbox.
IMPORTED_REPLY: Final = "_R_."


def stats_subject(service: str) -> str:
    return STATS.replace("*", service)


def heartbeat(node_id: str) -> str:
    return f"allot.hb.{_token(node_id)}"


def samples(node_id: str) -> str:
    return SAMPLES.replace("*", _token(node_id))


# What a node agent reports of the jobs placed on its node: appended under the node too,
# ``allot.evt.job.<job>.<node>.<type>``, so that the server can refuse a node's report for
# another node's job (logs written before said ``allot.evt.job.<job>.<type>``).
NODE_REPORTS: Final = (JobStarted, JobCheckpointed, JobExited, JobCancelled)


# Submissions appended together (docs/adr/0036): among the job events, where a job's own
# have its id, then their type, after "job", so no job id can take it.
SUBMITTED_TOGETHER: Final = f"{EVENTS_PREFIX}.job.JobsSubmitted"


def subject_for(event: Event) -> str:
    """The subject an event is appended under: by entity, then by type."""
    tag = type(event).__struct_config__.tag
    if isinstance(event, NODE_REPORTS) and event.node_id is not None:
        return f"{EVENTS_PREFIX}.job.{_token(event.job_id)}.{_token(event.node_id)}.{tag}"
    if isinstance(event, JobEvent):
        return f"{EVENTS_PREFIX}.job.{_token(event.job_id)}.{tag}"
    if isinstance(event, JobsSubmitted):
        return SUBMITTED_TOGETHER
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


def subject_matches(subject: str, pattern: str) -> bool:
    """NATS subject matching: ``*`` one token, ``>`` the rest."""
    tokens, wanted = subject.split("."), pattern.split(".")
    for n, want in enumerate(wanted):
        if want == ">":
            return len(tokens) > n
        if n >= len(tokens) or (want != "*" and want != tokens[n]):
            return False
    return len(tokens) == len(wanted)


def job_subjects(job_id: str) -> str:
    """Every event of one job, its node agents' reports included."""
    return f"{EVENTS_PREFIX}.job.{_token(job_id)}.>"


def under_own_subject(subject: str, event: Event) -> str | None:
    """Why ``event`` does not belong under ``subject``; None if it does. The server decides
    who may publish under which subject, so an event counts only under its own: a node
    agent may not report, under its own node, what another node's job did."""
    try:
        expected = subject_for(event)
    except ValueError as error:
        return str(error)
    if subject == expected:
        return None
    if isinstance(event, NODE_REPORTS):  # as written before reports named their node
        tag = type(event).__struct_config__.tag
        if subject == f"{EVENTS_PREFIX}.job.{event.job_id}.{tag}":
            return None
    return f"appended under {subject[:300]}, not its own subject {expected}"


def _token(value: str) -> str:
    if not _TOKEN.fullmatch(value):
        raise ValueError(f"{value!r} cannot be a subject token (letters, digits, '_' and '-')")
    return value
