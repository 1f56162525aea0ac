"""Everything that touches NATS: the embedded server, the event log, the codec, tracing; and
the event log's contract, kept in memory too (``allot.bus.log``, ``allot.bus.memory``)."""

from allot.bus.codec import decode, encode
from allot.bus.eventlog import Appended, Conflict, EventLog, EventTooLarge, Record
from allot.bus.log import Log
from allot.bus.memory import MemoryEventLog
from allot.bus.server import EmbeddedNats, nats_server_binary

__all__ = [
    "Appended",
    "Conflict",
    "EmbeddedNats",
    "EventLog",
    "EventTooLarge",
    "Log",
    "MemoryEventLog",
    "Record",
    "decode",
    "encode",
    "nats_server_binary",
]
