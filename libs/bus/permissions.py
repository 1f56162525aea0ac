"""What each identity may publish and subscribe, enforced by the NATS server, and the server
config that says so (docs/adr/0015).

Writers of the log: each service only the events it is the author of, a node agent only
those of its own node, the operator anything (it restores logs); no user appends.
Commands: every identity only under its own name (``allot.cmd.<name>.…``), operators also
under ``….admin.``; replies only in one's own inbox. Requests for a job's output likewise,
under ``allot.output.<node>.<name>`` (operators also ``….admin``), taken by that node's
agent alone. Everyone may read the log; only the
operator and the services may create the stream, nobody may change it, and only the
operator may delete its start (``allot log archive``). The snapshots of the folded log:
every identity of ``CORE`` may read them, only the planner (and the operator) write them.

Users live in an account of their own, ``USERS``; the services, node agents and operators
in ``CORE``, which holds the log. JetStream answers an API request on whatever reply subject
it names, with the server's rights, so a user in the log's account could have answers
written onto the log, and a user in the mirror's account could have an answer without a
body (a direct get of nothing) taken as a request to delete the mirror. So ``USERS`` has no
JetStream at all: users read the mirror, in ``READERS``, through imports of its info and
its direct gets, and reach the commands and health checks through imports from ``CORE``.
They may make no consumers, which would be theirs to keep alive for ever and of which a
stream takes only so many: one user could leave no room for the others.
"""

import json
from collections.abc import Iterable
from typing import Any

import msgspec

from allot.bus.identity import Identity
from allot.bus.tls import ServerTls
from allot.proto.queries import QUERIES, QUERY
from allot.proto.subjects import (
    ACCOUNTS_APPLY,
    ADMIN,
    ALL_EVENTS,
    BUDGET_GRANT,
    CANCEL,
    COMMANDS_PREFIX,
    EVENTS_PREFIX,
    HEARTBEATS,
    MIRROR,
    MIRROR_API,
    MIRROR_DELIVER,
    NODE_COMMAND,
    NODE_REPORTS,
    OPERATOR_ASKS,
    OUTPUT_PREFIX,
    PLAN_EVENTS,
    READERS_API,
    SAMPLES,
    SNAPSHOT_BUCKET,
    SNAPSHOT_STREAM,
    STATS,
    STREAM,
    SUBMIT,
    SUBMIT_MANY,
    SUBMITTED_TOGETHER,
    command,
    from_anyone,
    health,
    heartbeat,
    inbox_prefix,
    output_requests,
    samples,
    stats_subject,
)

_JOB = f"{EVENTS_PREFIX}.job.*"
_NODE = f"{EVENTS_PREFIX}.node.*"
ROUTE_USER = "route"  # what the servers of a cluster present to each other, with a secret
CORE = "CORE"  # the log's account: services, node agents, operators
READERS = "READERS"  # the users' mirror of the log, and the identity that makes it
USERS = "USERS"  # people, who read the mirror


# Reading the log: its info (the last sequence) and ordered consumers with their flow
# control. Not ``CONSUMER.CREATE.<stream>.>``: that also makes durable consumers.
READ_LOG = [
    f"$JS.API.STREAM.INFO.{STREAM}",
    f"$JS.API.CONSUMER.CREATE.{STREAM}",
    f"$JS.FC.{STREAM}.>",
]
# Reading the users' mirror: its info and direct gets, which leave nothing on the server.
# Users send them under READERS_API: in an account without JetStream, the server itself
# answers under $JS.API that there is none.
READ_MIRROR_RESPONSES = [
    (f"$JS.API.STREAM.INFO.{MIRROR}", "singleton"),
    (f"$JS.API.DIRECT.GET.{MIRROR}", "stream"),
]
READ_MIRROR = [subject.replace("$JS.API", READERS_API, 1) for subject, _ in READ_MIRROR_RESPONSES]
# Reading the snapshots of the folded log (docs/adr/0024): the object's meta, then its
# chunks through an ordered consumer. Every identity that reads the log may.
READ_SNAPSHOTS = [
    f"$JS.API.STREAM.INFO.{SNAPSHOT_STREAM}",
    f"$JS.API.STREAM.MSG.GET.{SNAPSHOT_STREAM}",
    f"$JS.API.CONSUMER.CREATE.{SNAPSHOT_STREAM}",
    f"$JS.FC.{SNAPSHOT_STREAM}.>",
]
# Writing them: the bucket's stream, its chunks and meta, and purging the chunks a new
# snapshot replaced. Only ``SNAPSHOT_WRITER`` may: every service folds the same state with
# the same code, so one trusted writer serves them all. And the operator, who archives the
# start of the log, and stores the state the rest begins from.
SNAPSHOT_WRITER = "planner"
WRITE_SNAPSHOTS = [
    f"$JS.API.STREAM.CREATE.{SNAPSHOT_STREAM}",
    f"$JS.API.STREAM.PURGE.{SNAPSHOT_STREAM}",
    f"$O.{SNAPSHOT_BUCKET}.>",
]
MAKE_STREAM = [f"$JS.API.STREAM.CREATE.{STREAM}"]
PURGE_STREAM = f"$JS.API.STREAM.PURGE.{STREAM}"
ACCOUNT_INFO = "$JS.API.INFO"  # whether JetStream is up: an operator's readiness check
# The events each service is the author of.
AUTHORED = {
    "intake": [
        f"{_JOB}.JobSubmitted",
        f"{_JOB}.ArraySubmitted",
        SUBMITTED_TOGETHER,
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
    "telemetry": [f"{_NODE}.NodeLost", f"{_NODE}.NodeHealthChanged", f"{_NODE}.NodeCordoned"],
}
# The commands each service answers.
ANSWERS = {
    "intake": [
        *(SUBMIT, SUBMIT_MANY, CANCEL),
        *(ADMIN + SUBMIT, ADMIN + SUBMIT_MANY, ADMIN + CANCEL, NODE_COMMAND),
    ],
    "ledger": [ACCOUNTS_APPLY, BUDGET_GRANT],
    "view": list(QUERIES),
}


def permissions(identity: Identity) -> dict[str, Any]:
    """The ``permissions`` block of the server config for ``identity``."""
    role = identity.role
    publish = [*READ_LOG, *READ_SNAPSHOTS]
    subscribe = [f"{inbox_prefix(identity.name)}.>"]
    responds = False
    if role == "user":
        publish = [*READ_MIRROR]
    if role == "mirror":
        publish = [f"$JS.API.STREAM.INFO.{MIRROR}", f"$JS.API.STREAM.CREATE.{MIRROR}"]
    if role in ("operator", "user"):
        publish += [command(identity.name, SUBMIT), command(identity.name, SUBMIT_MANY)]
        publish.append(command(identity.name, CANCEL))
        publish.append(command(identity.name, f"{QUERY}>"))  # the read model's questions
        publish.append("allot.health.*")
        publish.append(f"{OUTPUT_PREFIX}.*.{identity.name}")  # a job's output, of any node
    if role == "operator":
        # The operator is the root of the installation: it restores a log (``allot log
        # import``), quarantines events, and may write any event, as the services may not.
        publish += [command(identity.name, f"{ADMIN}>"), ALL_EVENTS, *MAKE_STREAM, ACCOUNT_INFO]
        publish += [*WRITE_SNAPSHOTS, PURGE_STREAM]  # archives the start of the log
        publish.append(f"{OUTPUT_PREFIX}.*.{identity.name}.{OPERATOR_ASKS}")
        subscribe.append(HEARTBEATS)
    if role in AUTHORED:
        publish += [*AUTHORED[role], *MAKE_STREAM, stats_subject(role)]
        subscribe += [from_anyone(name) for name in ANSWERS.get(role, [])]
        if role in ANSWERS:
            subscribe.append(health(role))
            responds = True
        if role == "telemetry":
            subscribe.append(HEARTBEATS)
        if role == SNAPSHOT_WRITER:
            publish += WRITE_SNAPSHOTS
    if role == "view":  # the read model: answers every query, appends nothing
        subscribe += [*(from_anyone(name) for name in ANSWERS[role]), health(role)]
        publish.append(stats_subject(role))  # what it counts, for the metrics
        responds = True
    if role == "metrics":
        subscribe += [STATS, SAMPLES]  # what the services count, and the GPUs' load
    if role == "node":
        assert identity.node_id is not None
        node = identity.node_id
        publish += [
            heartbeat(node),
            samples(node),
            f"{EVENTS_PREFIX}.node.{node}.NodeRegistered",
            *(f"{_JOB}.{node}.{kind.__struct_config__.tag}" for kind in NODE_REPORTS),
        ]
        subscribe.append(output_requests(node))  # the output of the jobs it ran
        responds = True
    block: dict[str, Any] = {
        "publish": {"allow": publish},
        "subscribe": {"allow": subscribe},
    }
    if responds:
        # A reply to a request this identity received, and only for a moment: a service
        # needs no publish right on its clients' inboxes.
        block["allow_responses"] = {"max": 1, "expires": "1m"}
    return block


class Cluster(msgspec.Struct, frozen=True, kw_only=True):
    """A JetStream cluster a server joins: its name, the port for routes, the route URLs of
    its members (``nats-route://host:6222``) and the secret every route presents. A server
    that joins as a route may publish anything in any account, so a certificate from the
    CA is not enough: the CA signs clients' certificates too."""

    name: str
    port: int = 6222
    routes: tuple[str, ...] = ()
    secret: str


def server_config(
    identities: Iterable[Identity] | None,
    *,
    host: str,
    port: int,
    store_dir: str,
    pid_file: str | None = None,
    tls: ServerTls | None = None,
    server_name: str | None = None,
    cluster: Cluster | None = None,
    websocket_port: int | None = None,
) -> str:
    """A nats-server config (JSON is valid NATS config) admitting exactly ``identities``
    (None: anyone, to do anything), over TLS where ``tls`` is given; a member of
    ``cluster`` where that is, its routes over TLS too, each server verifying the others."""
    config: dict[str, Any] = {"host": host, "port": port, "jetstream": {"store_dir": store_dir}}
    if pid_file is not None:
        config["pid_file"] = pid_file
    if server_name is not None:
        config["server_name"] = server_name
    if cluster is not None:
        config["cluster"] = {
            "name": cluster.name,
            "host": host,
            "port": cluster.port,
            "authorization": {"user": ROUTE_USER, "password": cluster.secret},
            "routes": [_with_secret(route, cluster.secret) for route in cluster.routes],
        }
        if tls is not None:
            config["cluster"]["tls"] = {**tls.config(), "verify": True}
    if identities is not None:
        config["accounts"] = accounts(identities)
    if tls is not None:
        config["tls"] = tls.config()
    if websocket_port is not None:
        # For the dashboard's actions: a browser connects as its user's identity, with the
        # same rights as the CLI (an nkey signs the server's challenge; no origin check
        # is needed, since no page can sign without the seed).
        socket: dict[str, Any] = {"host": host, "port": websocket_port}
        socket |= {"tls": tls.config()} if tls is not None else {"no_tls": True}
        config["websocket"] = socket
    return json.dumps(config, indent=2) + "\n"


def accounts(identities: Iterable[Identity]) -> dict[str, Any]:
    """The ``accounts`` block: who is in which account, and what passes between them."""
    members: dict[str, list[dict[str, Any]]] = {CORE: [], READERS: [], USERS: []}
    for identity in sorted(identities, key=lambda i: i.name):
        account = {"user": USERS, "mirror": READERS}.get(identity.role, CORE)
        members[account].append({"nkey": identity.public_key, "permissions": permissions(identity)})
    # What the mirror needs of the log: consumers made through the log's API (seen in
    # READERS under MIRROR_API), their flow control, and the subjects they deliver to.
    feed_api = [f"$JS.API.CONSUMER.CREATE.{STREAM}", f"$JS.API.CONSUMER.CREATE.{STREAM}.>"]
    services = [f"{COMMANDS_PREFIX}.>", "allot.health.*", f"{OUTPUT_PREFIX}.>"]
    return {
        CORE: {
            "jetstream": "enabled",
            "users": members[CORE],
            "exports": [
                *({"service": subject, "accounts": [USERS]} for subject in services),
                *({"service": subject, "accounts": [READERS]} for subject in feed_api),
                {"service": f"$JS.FC.{STREAM}.>", "accounts": [READERS]},
                {"stream": f"{MIRROR_DELIVER}.>", "accounts": [READERS]},
            ],
        },
        READERS: {
            "jetstream": "enabled",
            "users": members[READERS],
            "imports": [
                *(
                    {
                        "service": {"account": CORE, "subject": subject},
                        "to": subject.replace("$JS.API", MIRROR_API, 1),
                    }
                    for subject in feed_api
                ),
                {"service": {"account": CORE, "subject": f"$JS.FC.{STREAM}.>"}},
                {"stream": {"account": CORE, "subject": f"{MIRROR_DELIVER}.>"}},
            ],
            # A direct get is answered by a batch of messages, not by one.
            "exports": [
                {"service": subject, "accounts": [USERS], "response": response}
                for subject, response in READ_MIRROR_RESPONSES
            ],
        },
        USERS: {  # no JetStream of its own: nothing in it for an answer to be aimed at
            "users": members[USERS],
            "imports": [
                # share: the server stamps who asked (Nats-Request-Info) on each request
                *(
                    {"service": {"account": CORE, "subject": subject}, "share": True}
                    for subject in services
                ),
                *(
                    {
                        "service": {"account": READERS, "subject": subject},
                        "to": subject.replace("$JS.API", READERS_API, 1),
                    }
                    for subject, _ in READ_MIRROR_RESPONSES
                ),
            ],
        },
    }


def _with_secret(route: str, secret: str) -> str:
    """``nats-route://host:6222`` as this server dials it: with the routes' credentials."""
    scheme, sep, rest = route.partition("://")
    return f"{scheme}{sep}{ROUTE_USER}:{secret}@{rest.rpartition('@')[2]}" if sep else route
