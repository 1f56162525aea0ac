"""What each identity may publish and subscribe, enforced by the NATS server, and the server
config that says so (docs/adr/0015).

Writers of the log: each service only the events it is the author of, a node agent only
those of its own node, the operator anything (it restores logs); no user appends.
Commands: every identity only under its own name (``allot.cmd.<name>.…``), operators also
under ``….admin.``; replies only in one's own inbox. Everyone may read the log (an ordered
consumer of the stream); only the operator and the services may create the stream, and
nobody may change it or delete from it.
"""

import json
from collections.abc import Iterable
from typing import Any

from allot.bus.identity import Identity
from allot.bus.tls import ServerTls
from allot.proto.subjects import (
    ACCOUNTS_APPLY,
    ADMIN,
    ALL_EVENTS,
    BUDGET_GRANT,
    CANCEL,
    EVENTS_PREFIX,
    HEARTBEATS,
    NODE_COMMAND,
    NODE_REPORTS,
    PLAN_EVENTS,
    STREAM,
    SUBMIT,
    command,
    from_anyone,
    health,
    heartbeat,
    inbox_prefix,
)

_JOB = f"{EVENTS_PREFIX}.job.*"
_NODE = f"{EVENTS_PREFIX}.node.*"
# Reading the log: stream info (its last sequence) and ordered consumers with their flow
# control. Not ``CONSUMER.CREATE.ALLOT.>``: that also makes named, durable consumers.
READ_LOG = [
    f"$JS.API.STREAM.INFO.{STREAM}",
    f"$JS.API.CONSUMER.CREATE.{STREAM}",
    f"$JS.FC.{STREAM}.>",
]
MAKE_STREAM = [f"$JS.API.STREAM.CREATE.{STREAM}"]
ACCOUNT_INFO = "$JS.API.INFO"  # whether JetStream is up: an operator's readiness check
# The events each service is the author of.
AUTHORED = {
    "intake": [
        f"{_JOB}.JobSubmitted",
        f"{_JOB}.JobCancelRequested",
        f"{_NODE}.NodeCordoned",
        f"{_NODE}.NodeUncordoned",
    ],
    "ledger": [f"{EVENTS_PREFIX}.account.>"],
    "planner": [PLAN_EVENTS, f"{_JOB}.MaxWaitExceeded"],
    "preemptor": [
        f"{_JOB}.StopRequested",
        f"{_JOB}.KillRequested",
        f"{_JOB}.JobPreempted",
        f"{_JOB}.GraceTooShort",
        f"{_JOB}.JobRequeued",
        f"{_NODE}.NodeDrained",
    ],
    "telemetry": [f"{_NODE}.NodeLost", f"{_NODE}.NodeHealthChanged"],
}
# The commands each service answers.
ANSWERS = {
    "intake": [SUBMIT, CANCEL, ADMIN + SUBMIT, ADMIN + CANCEL, NODE_COMMAND],
    "ledger": [ACCOUNTS_APPLY, BUDGET_GRANT],
}


def permissions(identity: Identity) -> dict[str, Any]:
    """The ``permissions`` block of the server config for ``identity``."""
    publish = [*READ_LOG]
    subscribe = [f"{inbox_prefix(identity.name)}.>"]
    responds = False
    role = identity.role
    if role in ("operator", "user"):
        publish += [command(identity.name, SUBMIT), command(identity.name, CANCEL)]
        publish.append("allot.health.*")
    if role == "operator":
        # The operator is the root of the installation: it restores a log (``allot log
        # import``), quarantines events, and may write any event, as the services may not.
        publish += [command(identity.name, f"{ADMIN}>"), ALL_EVENTS, *MAKE_STREAM, ACCOUNT_INFO]
        subscribe.append(HEARTBEATS)
    if role in AUTHORED:
        publish += [*AUTHORED[role], *MAKE_STREAM]
        subscribe += [from_anyone(name) for name in ANSWERS.get(role, [])]
        if role in ANSWERS:
            subscribe.append(health(role))
            responds = True
        if role == "telemetry":
            subscribe.append(HEARTBEATS)
    if role == "node":
        assert identity.node_id is not None
        node = identity.node_id
        publish += [
            heartbeat(node),
            f"{EVENTS_PREFIX}.node.{node}.NodeRegistered",
            *(f"{_JOB}.{node}.{kind.__struct_config__.tag}" for kind in NODE_REPORTS),
        ]
    block: dict[str, Any] = {
        "publish": {"allow": publish},
        "subscribe": {"allow": subscribe},
    }
    if responds:
        # A reply to a request this identity received, and only for a moment: a service
        # needs no publish right on its clients' inboxes.
        block["allow_responses"] = {"max": 1, "expires": "1m"}
    return block


def server_config(
    identities: Iterable[Identity] | None,
    *,
    host: str,
    port: int,
    store_dir: str,
    pid_file: str,
    tls: ServerTls | None = None,
) -> str:
    """A nats-server config (JSON is valid NATS config) admitting exactly ``identities``
    (None: anyone, to do anything), over TLS where ``tls`` is given."""
    config: dict[str, Any] = {
        "host": host,
        "port": port,
        "pid_file": pid_file,
        "jetstream": {"store_dir": store_dir},
    }
    if identities is not None:
        config["authorization"] = {
            "users": [
                {"nkey": identity.public_key, "permissions": permissions(identity)}
                for identity in sorted(identities, key=lambda i: i.name)
            ]
        }
    if tls is not None:
        config["tls"] = tls.config()
    return json.dumps(config, indent=2) + "\n"
