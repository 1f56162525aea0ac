"""Write ``proto/asyncapi.json``: the AsyncAPI document of the command subjects, for
publishers in other languages.

FastStream makes it from the commands the intake and the ledger declare
(``allot.services.commands``); the payloads are then the JSON Schemas of the requests and
replies, made by msgspec (FastStream's generator cannot read msgspec Structs). Run
``python -m allot.services.asyncapi`` after changing a command; a test fails while the
checked-in document is stale.
"""

import json
import sys
from pathlib import Path
from typing import Any

import msgspec
from faststream.nats import NatsBroker
from faststream.nats.security import NatsNKey
from faststream.specification import AsyncAPI
from nats.aio.client import Client as NATS

from allot.bus.eventlog import EventLog
from allot.proto.commands import CONTRACTS, FieldError
from allot.proto.limits import MAX_REQUEST_BYTES
from allot.proto.queries import QUERIES
from allot.proto.schema import strict
from allot.services.commands import contract_of
from allot.services.intake.app import Intake
from allot.services.ledger.app import Ledger
from allot.services.view.app import View

DOCUMENT = Path(__file__).resolve().parent.parent / "proto" / "asyncapi.json"
_SCHEMAS = "#/components/schemas/{name}"
DESCRIPTION = (
    "Commands are requests on allot.cmd.<principal>.<command>, <principal> being the name of "
    "the identity that sends them: the server lets an identity publish only under its own "
    "name, and read replies only under the inbox prefix _INBOX_<principal>. The body is "
    f"JSON, at most {MAX_REQUEST_BYTES} bytes; a field a request does not name is refused. "
    "Every reply is JSON; a non-empty `errors` means nothing was done, each error naming "
    "the field, the value it got and what is accepted."
)


def document() -> dict[str, Any]:
    """The document, as JSON-able data."""
    unconnected = EventLog(NATS())  # the services only declare their commands here
    broker = NatsBroker(
        "nats://127.0.0.1:4222",
        security=NatsNKey.from_seed("<the seed of the sender's identity>"),
        description="Allot's command subjects",
    )
    for service in (Intake(unconnected), Ledger(unconnected), View(unconnected)):
        broker.include_router(service.commands.router)
    spec = AsyncAPI(broker, title="Allot commands", version="1", description=DESCRIPTION)
    doc: dict[str, Any] = spec.to_specification().to_jsonable()
    contracts = [*CONTRACTS.values(), *QUERIES.values()]
    types = sorted(
        {c.request for c in contracts} | {c.reply for c in contracts},
        key=lambda kind: kind.__name__,
    )
    _, schemas = msgspec.json.schema_components([*types, FieldError], ref_template=_SCHEMAS)
    requests = {c.request for c in contracts}
    _, held = msgspec.json.schema_components(sorted(requests, key=lambda k: k.__name__))
    strict({name: schemas[name] for name in held})
    components = doc.setdefault("components", {})
    messages = components.setdefault("messages", {})
    components["schemas"] = schemas
    for name, operation in doc["operations"].items():  # each named as its command
        contract = contract_of(name)
        channel = doc["channels"][name]
        channel["parameters"] = {"principal": {"description": "the sending identity's name"}}
        [request] = channel["messages"].values()
        message = request["$ref"].rsplit("/", 1)[-1]
        messages[message]["payload"] = {"$ref": _SCHEMAS.format(name=contract.request.__name__)}
        reply = f"{name}:Reply"
        messages[reply] = {
            "title": reply,
            "payload": {"$ref": _SCHEMAS.format(name=contract.reply.__name__)},
        }
        operation["reply"] = {
            "address": {
                "description": "the request's reply subject, under _INBOX_<principal>",
                "location": "$message.header#/reply_to",
            },
            "messages": [{"$ref": f"#/components/messages/{reply}"}],
        }
    return doc


def render() -> str:
    return json.dumps(document(), indent=2, sort_keys=True) + "\n"


def main() -> int:
    DOCUMENT.write_text(render())
    print(DOCUMENT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
