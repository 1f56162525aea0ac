"""The one codec for events: JSON via msgspec, decoded into the tagged union of all events."""

import msgspec

from allot.proto.events import AnyEvent, Event

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(AnyEvent)


def encode(event: Event) -> bytes:
    return _encoder.encode(event)


def decode(data: bytes) -> Event:
    """Raises ``msgspec.DecodeError`` (or its subclass ``ValidationError``) on bad input."""
    event: Event = _decoder.decode(data)
    return event
