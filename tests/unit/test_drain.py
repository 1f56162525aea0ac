"""Drains: graceful ones stop resumable jobs and let the others finish; ``--now`` ones
stop every job as soon as its minimum runtime allows."""

from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from allot.core import DEFAULT_POLICY, plan
from allot.core.drain import Fate, fates
from allot.core.executor import Drained, Stop, due
from allot.proto.events import Event, JobCheckpointed, NodeCordoned, NodeUncordoned
from tests import builders as b
from tests.builders import fold

S = 10**9
MINUTE = 60 * S
HOUR = 60 * MINUTE
NOW = 100 * HOUR


def running(job_id: str, gpu: int, *, ran: int = HOUR, **spec: Any) -> list[Event]:
    """A one-GPU job of ``spec`` running on n1 since ``NOW - ran``."""
    start = msgspec.structs.replace(b.started(job_id, "n1", [gpu]), meta=b.meta(NOW - ran))
    return [b.submitted(job_id, **spec), b.plan((job_id, "n1", [gpu])), start]


def drain(now: bool | None) -> NodeCordoned:
    """A drain of n1; ``now`` None: an event written before drains could be graceful."""
    if now is None:
        return NodeCordoned(meta=b.meta(), node_id="n1", drain=True)
    return NodeCordoned(meta=b.meta(), node_id="n1", drain=True, now=now)


def drained_jobs(*events: Event, at: int = NOW) -> list[str]:
    decided = plan(fold(b.node("n1", 4), *events), at, DEFAULT_POLICY)
    assert all(p.code == "DRAIN" for p in decided.preemptions)
    return [p.job_id for p in decided.preemptions]


def test_a_graceful_drain_stops_resumable_jobs_and_leaves_the_others_to_finish() -> None:
    jobs = [
        *running("resumable", 0, resumable=True),
        *running("once", 1, max_runtime_ns=2 * HOUR),
        *running("endless", 2),
    ]
    assert drained_jobs(*jobs, drain(now=False)) == ["resumable"]


def test_a_drain_now_stops_every_job_past_its_minimum_runtime_as_drains_did_before() -> None:
    jobs = [
        *running("resumable", 0, resumable=True),
        *running("once", 1, max_runtime_ns=2 * HOUR),
        *running("endless", 2),
    ]
    for now in (True, None):  # an old event, without the field, drained at once
        assert drained_jobs(*jobs, drain(now)) == ["endless", "once", "resumable"]


def test_a_job_that_cannot_resume_ends_at_its_max_runtime_as_a_max_runtime_stop() -> None:
    state = fold(b.node("n1", 4), *running("once", 1, max_runtime_ns=HOUR), drain(now=False))
    assert plan(state, NOW, DEFAULT_POLICY).preemptions == []
    [stop] = due(state, NOW)
    assert isinstance(stop, Stop)
    assert stop.kind == "max_runtime"


def test_a_gracefully_draining_node_is_drained_once_its_last_job_ended_on_its_own() -> None:
    events = [b.node("n1", 4), *running("once", 0), drain(now=False)]
    assert plan(fold(*events), NOW, DEFAULT_POLICY).preemptions == []
    assert due(fold(*events), NOW) == []
    assert due(fold(*events, b.exited("once", "n1")), NOW) == [Drained(node_id="n1", drain=1)]


def test_drain_now_on_a_graceful_drain_hastens_it_and_an_uncordon_ends_it() -> None:
    jobs = running("endless", 0)
    assert drained_jobs(*jobs, drain(now=False), drain(now=True)) == ["endless"]
    # A graceful cordon does not soften a drain already under way.
    assert drained_jobs(*jobs, drain(now=True), drain(now=False)) == ["endless"]
    uncordoned = NodeUncordoned(meta=b.meta(), node_id="n1")
    assert drained_jobs(*jobs, drain(now=True), uncordoned, drain(now=False)) == []


@settings(max_examples=100, deadline=None)
@given(
    ran_min=st.integers(0, 600),
    max_runtime_min=st.integers(1, 600) | st.none(),
    min_runtime_min=st.integers(0, 60),
    funded=st.booleans(),
)
def test_a_job_that_cannot_resume_is_never_a_victim_of_a_graceful_drain(
    ran_min: int, max_runtime_min: int | None, min_runtime_min: int, funded: bool
) -> None:
    max_runtime = None if max_runtime_min is None else max(max_runtime_min, min_runtime_min)
    state = fold(
        b.node("n1", 4),
        *running(
            "once", 0, ran=ran_min * MINUTE, min_runtime_ns=min_runtime_min * MINUTE,
            max_runtime_ns=None if max_runtime is None else max(1, max_runtime) * MINUTE,
        ),
        drain(now=False),
    )  # fmt: skip
    state.jobs["once"].funded = funded
    assert plan(state, NOW, DEFAULT_POLICY).preemptions == []
    assert [f.stopped for f in fates(state, "n1")] == [False]


def test_the_fates_of_a_drain_say_who_is_stopped_when_and_who_is_left_to_finish() -> None:
    events = [
        b.node("n1", 4),
        *running("resumable", 0, resumable=True),
        JobCheckpointed(
            meta=b.meta(NOW - 5 * MINUTE), job_id="resumable", node_id="n1", path="/c", step=3
        ),
        *running("young", 1, ran=10 * MINUTE, min_runtime_ns=HOUR),
        *running("once", 2, max_runtime_ns=2 * HOUR),
    ]
    state = fold(*events)
    state.jobs["young"].funded = True  # protected for 50 more minutes
    graceful = {f.job_id: f for f in fates(state, "n1", immediate=False)}
    assert graceful == {
        "once": Fate(job_id="once", resumable=False, stopped=False, not_before=None,
                     ends_by=NOW + HOUR, since=NOW - HOUR),
        "resumable": Fate(job_id="resumable", resumable=True, stopped=True, not_before=None,
                          ends_by=None, since=NOW - 5 * MINUTE, checkpointed=True),
        "young": Fate(job_id="young", resumable=False, stopped=False,
                      not_before=NOW + 50 * MINUTE, ends_by=None, since=NOW - 10 * MINUTE),
    }  # fmt: skip
    immediate = {f.job_id: f.stopped for f in fates(state, "n1", immediate=True)}
    assert immediate == {"once": True, "resumable": True, "young": True}
    # Of a node already draining, its own mode is taken.
    state = fold(*events, drain(now=False))
    assert [f.stopped for f in fates(state, "n1")] == [False, True, False]
