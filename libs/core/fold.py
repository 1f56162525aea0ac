"""Folding events into state: ``apply(state, seq, event)``.

The fold never raises, whatever the event: one that does not fit the state it meets (a
start for an unknown job, a duplicate, a stale admission), one that no honest producer
writes (``allot.core.wellformed``) and one an operator quarantined are recorded as ignored,
with the reason, and leave the state as it was. Live services and replay therefore agree.

A quarantine (``EventQuarantined``) names an earlier event: from the quarantine on, the
state is the fold of the log before it without that event. The fold marks the state
``refold_due``; whoever holds the log then calls ``refold`` with the records up to it.
"""

from collections.abc import Iterable
from typing import Protocol

from allot.core import fold_jobs, fold_ledger, fold_nodes, fold_plans, wellformed
from allot.core.model import HOLDERS, FoldRule, Ignore, State
from allot.proto.events import Event, EventQuarantined, PlanComputed

# The reason recorded when a rule failed on an event no check refused. It is a bug to fix
# (the fuzz tests look for it); the fold goes on, as it must for every service alike.
RULE_FAILED = "fold rule failed"


def _quarantined(state: State, seq: int, e: EventQuarantined) -> None:
    if e.seq >= seq:
        raise Ignore(f"sequence {e.seq} is not before the quarantine")
    if e.seq in state.quarantined:
        return  # said before, or this is the refold that carries it out
    state.quarantined[e.seq] = e.reason or "no reason given"
    state.refold_due = True


_RULES: dict[type[Event], FoldRule] = {
    **fold_jobs.RULES,
    **fold_plans.RULES,
    **fold_nodes.RULES,
    **fold_ledger.RULES,
    EventQuarantined: _quarantined,
}

# What a folded event changes of what planners keep between cycles: their memos key on
# these versions of the state (``allot.core.planning.memo``), bumped here once the event's
# rule has applied. Each fold module lists, beside its rules, every type it has a rule for
# (none being a decision too): a type with a rule and no entry stops the import. Where only
# some events of a type change what is kept, the rule bumps the version itself: a
# submission to an account new to the state (fair share), a plan that admits, preempts or
# holds (holders).
CHANGES: dict[type[Event], tuple[str, ...]] = {
    **fold_jobs.CHANGES,
    **fold_plans.CHANGES,
    **fold_nodes.CHANGES,
    **fold_ledger.CHANGES,
    EventQuarantined: (),  # a refold follows, and planners start their memos again
}
# An event type -> its rule, and the versions it changes: one lookup an event.
_FOLDS: dict[type[Event], tuple[FoldRule, tuple[str, ...]]] = {
    kind: (rule, CHANGES[kind]) for kind, rule in _RULES.items()
}


def apply(state: State, seq: int, event: Event) -> State:
    """Fold one event at stream sequence ``seq`` into ``state`` (in place) and return it."""
    if seq <= state.seq:
        state.note_ignored(seq, _tag(event), f"sequence {seq} already folded (at {state.seq})")
        return state
    fold = _FOLDS.get(type(event))
    try:
        if seq in state.quarantined:
            raise Ignore(f"quarantined: {state.quarantined[seq]}")
        if problem := wellformed.problem(event):
            raise Ignore(f"malformed: {problem}")
        if fold is None:
            raise Ignore("no fold rule for this event type")
        rule, changes = fold
        rule(state, seq, event)
        for version in changes:
            setattr(state, version, getattr(state, version) + 1)
            if version == HOLDERS:
                state.holder_changes.add(event.job_id)  # type: ignore[attr-defined]
    except Ignore as why:
        state.note_ignored(seq, _tag(event), str(why))
    except Exception as error:  # the last line of defence: no event may stop a fold
        state.note_ignored(seq, _tag(event), f"{RULE_FAILED}: {error!r}")
    if isinstance(event, PlanComputed):
        # Folded or not, it is the plan subject's latest: the next plan must follow it.
        state.last_plan_seq = seq
    state.seq = seq
    return state


def refold(state: State, records: Iterable["LogRecord"], base: State | None = None) -> State:
    """The state after a quarantine: ``records`` (the log from its start, at least up to
    ``state.seq``) folded again without the events ``state`` has quarantined. Where the
    start of the log was archived, from ``base`` (a state no one else holds: the state the
    log now begins from, ``allot log archive``) and the records after it: a quarantined
    event folded into the base stays folded."""
    fresh = base if base is not None else State()
    fresh.quarantined = fresh.quarantined | state.quarantined
    fresh.refolds = state.refolds + 1
    for record in records:
        if record.seq > state.seq:
            break
        if record.seq > fresh.seq:
            apply_record(fresh, record)
    return fresh


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


def apply_record(state: State, record: LogRecord, log: Iterable[LogRecord] | None = None) -> State:
    """Fold a record of the log; one that could not be decoded (e.g. an event type from a
    newer schema) is recorded as ignored, with the decoder's reason. Given the ``log`` the
    record is part of (read again from its start), a quarantine's refold happens here too;
    without it, the caller sees ``state.refold_due`` and refolds."""
    if record.event is not None:
        apply(state, record.seq, record.event)
        if state.refold_due and log is not None:
            state.become(refold(state, log))
        return state
    if record.seq > state.seq:
        reason = state.quarantined.get(record.seq)
        state.note_ignored(
            record.seq, record.type, f"quarantined: {reason}" if reason else record.error
        )
        if record.type == _tag_of(PlanComputed):
            # Unreadable, but a plan all the same: the next plan must follow it.
            state.last_plan_seq = record.seq
        state.seq = record.seq
    return state


def pass_over(state: State, record: LogRecord) -> State:
    """Take a record's place in the log without folding it: for a service whose decisions
    read none of its type (telemetry reads only nodes), so that its state is caught up at
    the same sequence as everyone's without the cost of what it would never look at."""
    if record.seq > state.seq:
        if record.type == _tag_of(PlanComputed):
            state.last_plan_seq = record.seq  # as a fold would have kept it
        state.seq = record.seq
    return state


def _tag(event: Event) -> str:
    return _tag_of(type(event))


def _tag_of(event_type: type[Event]) -> str:
    return str(event_type.__struct_config__.tag)
