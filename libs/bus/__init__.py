"""Everything that touches NATS: the embedded server, the event log, the codec, tracing; and
the event log's contract, kept in memory too (``allot.bus.log``, ``allot.bus.memory``).

Each name below loads its module when first used, as ``allot.core``'s do: a command line
that only submits a job starts no embedded server's code."""

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from allot.bus.codec import decode, encode
    from allot.bus.eventlog import Appended, Conflict, EventLog, EventTooLarge, Record
    from allot.bus.log import Log
    from allot.bus.memory import MemoryEventLog
    from allot.bus.server import EmbeddedNats, nats_server_binary

_NAMES = {
    "allot.bus.codec": ("decode", "encode"),
    "allot.bus.eventlog": ("Appended", "Conflict", "EventLog", "EventTooLarge", "Record"),
    "allot.bus.log": ("Log",),
    "allot.bus.memory": ("MemoryEventLog",),
    "allot.bus.server": ("EmbeddedNats", "nats_server_binary"),
}
_MODULE_OF = {name: module for module, names in _NAMES.items() for name in names}

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


def __getattr__(name: str) -> object:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'allot.bus' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # the next use finds it without coming here
    return value
