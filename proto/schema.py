"""Write the JSON Schema of every message to ``proto/schema/``.

Run ``python -m allot.proto.schema`` after changing a message; a test fails while the
checked-in schemas are stale.
"""

import json
import sys
from pathlib import Path
from typing import Any

import msgspec

from allot.proto.commands import (
    AccountsApplyReply,
    AccountsApplyRequest,
    BudgetGrantReply,
    BudgetGrantRequest,
    CancelReply,
    CancelRequest,
    NodeCommandReply,
    NodeCommandRequest,
    SubmitReply,
    SubmitRequest,
)
from allot.proto.events import AnyEvent
from allot.proto.output import OutputReply, OutputRequest
from allot.proto.queries import QUERIES, Answer

SCHEMA_DIR = Path(__file__).parent / "schema"


def render() -> dict[str, str]:
    """File name -> JSON text, for the event union, each command and the request for a
    job's output."""
    documents: dict[str, Any] = {
        "events.json": msgspec.json.schema(AnyEvent),
        "submit-request.json": msgspec.json.schema(SubmitRequest),
        "submit-reply.json": msgspec.json.schema(SubmitReply),
        "cancel-request.json": msgspec.json.schema(CancelRequest),
        "cancel-reply.json": msgspec.json.schema(CancelReply),
        "node-command-request.json": msgspec.json.schema(NodeCommandRequest),
        "node-command-reply.json": msgspec.json.schema(NodeCommandReply),
        "accounts-apply-request.json": msgspec.json.schema(AccountsApplyRequest),
        "accounts-apply-reply.json": msgspec.json.schema(AccountsApplyReply),
        "budget-grant-request.json": msgspec.json.schema(BudgetGrantRequest),
        "budget-grant-reply.json": msgspec.json.schema(BudgetGrantReply),
        "output-request.json": msgspec.json.schema(OutputRequest),
        "output-reply.json": msgspec.json.schema(OutputReply),
    }
    for name, contract in QUERIES.items():
        documents[f"{name.replace('.', '-')}-request.json"] = msgspec.json.schema(contract.request)
    documents["query-answer.json"] = msgspec.json.schema(Answer)
    for name, doc in documents.items():
        if name.endswith("-request.json"):
            strict(doc.get("$defs", {}))
    return {
        name: json.dumps(doc, indent=2, sort_keys=True) + "\n" for name, doc in documents.items()
    }


def strict(definitions: dict[str, Any]) -> None:
    """Say of every object in ``definitions`` that it takes no other properties: what a
    request is held to (``allot.proto.commands.unknown_field``), though the same structs
    in events are not."""
    for definition in definitions.values():
        if "properties" in definition:
            definition.setdefault("additionalProperties", False)


def main() -> int:
    SCHEMA_DIR.mkdir(exist_ok=True)
    for name, text in render().items():
        (SCHEMA_DIR / name).write_text(text)
        print(SCHEMA_DIR / name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
