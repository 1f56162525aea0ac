"""A job's trail from the log: reasons as spans, admission, preemption with its cost."""

import msgspec

from allot.bus.codec import encode
from allot.bus.eventlog import make_record
from allot.core.trail import trail
from allot.proto.events import (
    Event,
    JobCheckpointed,
    JobRequeued,
    NodeCordoned,
    PendingReason,
    Preemption,
    StopRequested,
)
from allot.proto.subjects import subject_for
from tests import builders as b

S = 10**9


def as_records(*events: Event) -> list:  # type: ignore[type-arg]
    return [make_record(n, subject_for(e), encode(e), {}) for n, e in enumerate(events, start=1)]


def test_the_trail_tells_the_whole_story_in_order() -> None:
    waits = msgspec.structs.replace(
        b.plan(), now=2 * S, pending=[PendingReason(job_id="j", code="NO_FIT", params={"need": 4})]
    )
    admitted = msgspec.structs.replace(b.plan(("j", "n1", [0, 1, 2, 3])), now=5 * S)
    chosen = msgspec.structs.replace(
        b.plan(), now=9 * S, preemptions=[Preemption(job_id="j", code="TIER", params={"for": "nb"})]
    )
    steps = trail(
        as_records(
            b.node("n1", 4),
            b.submitted("j", 4, at=S, resumable=True),
            b.submitted("other", 1),
            waits,
            admitted,
            msgspec.structs.replace(b.started("j", "n1", [0, 1, 2, 3]), meta=b.meta(6 * S)),
            JobCheckpointed(meta=b.meta(7 * S), job_id="j", node_id="n1", path="/c", step=1),
            JobCheckpointed(meta=b.meta(8 * S), job_id="j", node_id="n1", path="/c", step=2),
            chosen,
            StopRequested(meta=b.meta(10 * S), job_id="j", grace_ns=30 * S, reason="TIER for nb"),
            msgspec.structs.replace(b.exited("j", "n1", 0), meta=b.meta(11 * S), stopped_in_ns=S),
            msgspec.structs.replace(b.preempted("j", lost_gpu_ms=4000), meta=b.meta(12 * S)),
            JobRequeued(meta=b.meta(12 * S), job_id="j", reason="preempted"),
        ),
        "j",
    )
    assert [s.what for s in steps] == [
        "submitted", "waiting", "admitted", "started", "checkpointed", "preempting",
        "stop requested", "exited", "preempted", "requeued",
    ]  # fmt: skip
    waiting = steps[1]
    assert (waiting.text, waiting.at, waiting.until) == ("NO_FIT(need 4)", 2 * S, 5 * S)
    assert steps[2].text == "to n1[0,1,2,3], unfunded"
    assert steps[4].text == "checkpoint 2 (2 seen)"  # a run of checkpoints reads as its latest
    assert steps[5].text == "chosen to stop: TIER(for nb)"
    assert steps[8].text.startswith("lost 4.0 GPU-s")


def test_a_decision_the_fold_ignored_is_no_step() -> None:
    cordoned = NodeCordoned(meta=b.meta(), node_id="n1")
    steps = trail(
        as_records(b.node("n1", 1), b.submitted("j"), cordoned, b.plan(("j", "n1", [0]))), "j"
    )
    assert [s.what for s in steps] == ["submitted"]


def test_a_preemption_the_fold_ignored_as_already_chosen_is_no_step() -> None:
    chosen = Preemption(job_id="j", code="TIER", params={"for": "nb"})
    again = [msgspec.structs.replace(b.plan(), preemptions=[chosen]) for _ in range(2)]
    steps = trail(
        as_records(
            b.node("n1", 1),
            b.submitted("j"),
            b.plan(("j", "n1", [0])),
            b.started("j", "n1", [0]),
            *again,
        ),
        "j",
    )
    assert [s.what for s in steps] == ["submitted", "admitted", "started", "preempting"]
