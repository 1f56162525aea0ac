"""The one codec for events: JSON via msgspec, decoded into the tagged union of all events.

Events of the current schema decode directly. An event written under an older schema
version is upcast: read as plain data, brought up to date by the upcasters registered for
its type and version, then decoded. Events of a newer version decode as long as they only
add fields (unknown fields are ignored); anything else is an error the fold records as an
ignored event, in the live services and in replay alike.
"""

from collections.abc import Callable
from typing import Any

import msgspec

from allot.proto.events import SCHEMA_VERSION, AnyEvent, Event
from allot.proto.limits import MAX_EVENT_BYTES, check_json

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(AnyEvent)
_plain = msgspec.json.Decoder()

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]


def _admissions_per_node(event: dict[str, Any]) -> dict[str, Any]:
    """Version 1 to 2: ``{job_id, node_id, gpus}`` admissions get a list of placements."""
    admissions = []
    for admission in event.get("admissions", []):
        upcast = {k: v for k, v in admission.items() if k not in ("node_id", "gpus")}
        upcast["placements"] = [{"node_id": admission["node_id"], "gpus": admission["gpus"]}]
        admissions.append(upcast)
    return {**event, "admissions": admissions}


# (event type, the version it upcasts from) -> the step to the next version
UPCASTERS: dict[tuple[str, int], Upcaster] = {
    ("PlanComputed", 1): _admissions_per_node,
}


def encode(event: Event) -> bytes:
    return _encoder.encode(event)


def decode(data: bytes) -> Event:
    """Raises ``msgspec.DecodeError`` (or its subclass ``ValidationError``) on bad input, and
    nothing else, whatever the bytes: the fold of every service rests on that."""
    check_json(data, MAX_EVENT_BYTES)
    try:
        return _decode(data)
    except msgspec.DecodeError:
        raise
    except Exception as error:  # a decoder bug must not stop a fold
        raise msgspec.DecodeError(f"cannot decode: {error!r}") from None


def _decode(data: bytes) -> Event:
    try:
        event: Event = _decoder.decode(data)
        return event
    except msgspec.ValidationError:
        plain = _plain.decode(data)
        meta = plain.get("meta") if isinstance(plain, dict) else None
        version = meta.get("v", 1) if isinstance(meta, dict) else None
        if not isinstance(version, int) or not 1 <= version < SCHEMA_VERSION:
            raise  # not an older version we know: there is nothing to upcast from
        try:
            return upcast(plain, version)
        except (KeyError, TypeError, AttributeError, ValueError) as error:
            problem = f"cannot upcast from version {version}: {error!r}"
            raise msgspec.ValidationError(problem) from None


def upcast(plain: dict[str, Any], version: int) -> Event:
    """An old event brought to the current schema, one version at a time."""
    kind = plain.get("type", "")
    for step in range(version, SCHEMA_VERSION):
        upcaster = UPCASTERS.get((kind, step))
        if upcaster is not None:
            plain = upcaster(plain)
    event: Event = msgspec.convert(plain, AnyEvent)
    return event
