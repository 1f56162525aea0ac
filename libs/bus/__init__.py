"""Everything that touches NATS: the embedded server, the event log, the codec, tracing."""

from allot.bus.codec import decode, encode
from allot.bus.eventlog import Appended, Conflict, EventLog, Record
from allot.bus.server import EmbeddedNats, nats_server_binary

__all__ = [
    "Appended",
    "Conflict",
    "EmbeddedNats",
    "EventLog",
    "Record",
    "decode",
    "encode",
    "nats_server_binary",
]
