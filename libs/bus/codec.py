"""The one codec for events: JSON via msgspec, decoded into the tagged union of all events.

Each event type has its own version (``Event.VERSION``); ``meta.v`` records the one an event
was written at (docs/adr/0028). Reading, an event of its type's current version decodes in
one typed pass. An older one is upcast every time it is read: read as plain data, brought up
to date by its type's chain of upcasters (``allot.proto.upcasters``), then converted. Events
of a newer version decode as long as they only add fields (unknown fields are ignored);
anything else is an error the fold records as an ignored event, in the live services and in
replay alike.
"""

from collections.abc import Mapping
from typing import Any, Final

import msgspec

from allot.proto.events import EVENT_BY_TAG, AnyEvent, Event
from allot.proto.limits import MAX_EVENT_BYTES, check_json
from allot.proto.upcasters import UPCASTERS, Upcaster

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(AnyEvent)
_plain = msgspec.json.Decoder()


def upcast_floors(upcasters: Mapping[tuple[str, int], Upcaster]) -> dict[type[Event], int]:
    """For each type some of whose versions need upcasting, the oldest version that does
    not: its events written at that version or later are read as they are."""
    floors: dict[type[Event], int] = {}
    for tag, step in upcasters:
        kind = EVENT_BY_TAG[tag]
        if step < kind.VERSION:
            floors[kind] = max(floors.get(kind, step + 1), step + 1)
    return floors


# The fast path asks only whether a decoded event's type is among these: one set lookup.
_UPCAST_BELOW: Final = upcast_floors(UPCASTERS)
_UPCASTABLE: Final = frozenset(_UPCAST_BELOW)


def encode(event: Event) -> bytes:
    """The event as JSON, its ``meta.v`` the version of its type this code writes: the
    fields it encodes are that version's, whatever version the event was read at."""
    version = event.VERSION
    if event.meta.v != version:
        meta = msgspec.structs.replace(event.meta, v=version)
        event = msgspec.structs.replace(event, meta=meta)
    return _encoder.encode(event)


def decode(data: bytes) -> Event:
    """Raises ``msgspec.DecodeError`` (or its subclass ``ValidationError``) on bad input, and
    nothing else, whatever the bytes: the fold of every service rests on that."""
    try:
        check_json(data, MAX_EVENT_BYTES)
        # Decoding typed first is the cheapest way to read the envelope: an event at its
        # type's current version, nearly every one, is then done.
        try:
            event: Event = _decoder.decode(data)
        except msgspec.ValidationError as failed:
            return _decode_older(data, failed)  # an old shape fails typed decoding
        kind = type(event)
        if kind in _UPCASTABLE and event.meta.v < _UPCAST_BELOW[kind]:
            return _decode_older(data, None)  # an old meaning may not
        return event
    except msgspec.DecodeError:
        raise
    except Exception as error:  # a decoder bug must not stop a fold
        raise msgspec.DecodeError(f"cannot decode: {error!r}") from None


def _decode_older(data: bytes, failed: msgspec.ValidationError | None) -> Event:
    """``data`` read as an event written at an older version of its type; ``failed``: why
    typed decoding refused it, raised again if it is no older version we know."""
    plain = _plain.decode(data)
    kind = EVENT_BY_TAG.get(str(plain.get("type"))) if isinstance(plain, dict) else None
    meta = plain.get("meta") if isinstance(plain, dict) else None
    version = meta.get("v", 1) if isinstance(meta, dict) else None
    if kind is None or not isinstance(version, int) or not 1 <= version < kind.VERSION:
        if failed is not None:
            raise failed  # there is nothing to upcast from
        raise msgspec.ValidationError(f"meta.v {version!r}: versions start at 1")
    try:
        return upcast(plain, kind, version)
    except (KeyError, TypeError, AttributeError, ValueError) as error:
        problem = f"cannot upcast {kind.__name__} from version {version}: {error!r}"
        raise msgspec.ValidationError(problem) from None


def upcast(plain: dict[str, Any], kind: type[Event], version: int) -> Event:
    """An event of ``kind`` written at ``version``, brought to the current one step by step;
    its ``meta.v`` still says the version it was written at."""
    tag = str(kind.__struct_config__.tag)
    for step in range(version, kind.VERSION):
        upcaster = UPCASTERS.get((tag, step))
        if upcaster is not None:
            plain = upcaster(plain)
    return msgspec.convert(plain, kind)
