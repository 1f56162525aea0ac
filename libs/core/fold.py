"""Folding events into state: ``apply(state, seq, event)``.

The fold never raises on an event that does not fit the state it meets (a start for an
unknown job, a duplicate, a stale admission): it records the event as ignored, with the
reason, and leaves the state as it was. Live services and replay therefore agree.
"""

from typing import Protocol

from allot.core import fold_jobs, fold_ledger, fold_nodes
from allot.core.model import FoldRule, Ignore, State
from allot.proto.events import Event, PlanComputed

_RULES: dict[type[Event], FoldRule] = {
    **fold_jobs.RULES,
    **fold_nodes.RULES,
    **fold_ledger.RULES,
}


def apply(state: State, seq: int, event: Event) -> State:
    """Fold one event at stream sequence ``seq`` into ``state`` (in place) and return it."""
    if seq <= state.seq:
        state.note_ignored(seq, _tag(event), f"sequence {seq} already folded (at {state.seq})")
        return state
    handler = _RULES.get(type(event))
    try:
        if handler is None:
            raise Ignore("no fold rule for this event type")
        handler(state, seq, event)
    except Ignore as why:
        state.note_ignored(seq, _tag(event), str(why))
    state.seq = seq
    return state


class LogRecord(Protocol):
    """What ``apply_record`` needs of a message read from the log."""

    @property
    def seq(self) -> int: ...
    @property
    def type(self) -> str: ...
    @property
    def event(self) -> Event | None: ...
    @property
    def error(self) -> str: ...


def apply_record(state: State, record: LogRecord) -> State:
    """Fold a record of the log; one that could not be decoded (e.g. an event type from a
    newer schema) is recorded as ignored, with the decoder's reason."""
    if record.event is not None:
        return apply(state, record.seq, record.event)
    if record.seq > state.seq:
        state.note_ignored(record.seq, record.type, record.error)
        if record.type == _tag_of(PlanComputed):
            # Unreadable, but a plan all the same: the next plan must follow it.
            state.last_plan_seq = record.seq
        state.seq = record.seq
    return state


def _tag(event: Event) -> str:
    return _tag_of(type(event))


def _tag_of(event_type: type[Event]) -> str:
    return str(event_type.__struct_config__.tag)
