"""The read model's service against a real NATS server: what it answers while the log is
folded again after a quarantine, and while its own calls wait on the log."""

import asyncio

import msgspec

from allot.bus import EventLog
from allot.core.fold import refold
from allot.core.trail import trail
from allot.proto.events import Event, EventQuarantined
from allot.proto.queries import JOB, Answer, JobQuery
from allot.services.replies import Sender
from allot.services.view.app import View
from tests import builders as b

ALICE = Sender(principal="alice", operator=False)


async def logged(event_log: EventLog, *events: Event) -> list:  # type: ignore[type-arg]
    for event in events:
        await event_log.append(event)
    return await event_log.read()


async def test_steps_folded_while_the_view_reads_the_log_stay_in_the_trails(
    event_log: EventLog,
) -> None:
    records = await logged(
        event_log,
        b.node("n1", 1),
        b.submitted("j", 1),
        b.submitted("bad", 1),
        EventQuarantined(meta=b.meta(), seq=3, reason="bad"),
        b.plan(("j", "n1", [0])),
        b.started("j", "n1", [0]),
    )
    view = View(event_log)
    model = view.model
    # Its follow loop folded the log up to the quarantine, and again without the event.
    for record in records[:4]:
        model.fold(model.state, record)
    model.state.become(refold(model.state, records[:4]))
    # Its tick acts on the log (reading it) as the follow loop folds what came next:
    # the two run side by side, only the calls of the tick are one at a time.
    acting = asyncio.create_task(view._caught_up())
    await asyncio.sleep(0)
    for record in records[4:]:
        model.fold(model.state, record)
    await acting
    await view.commands.close()
    assert [step.what for step in model.trails.of("j")] == ["submitted", "admitted", "started"]
    assert model.trails.of("j") == trail(records, "j")


async def test_no_answer_comes_from_a_state_about_to_be_folded_again(
    event_log: EventLog,
) -> None:
    records = await logged(
        event_log,
        b.node("n1", 1),
        b.submitted("bad", 1),
        EventQuarantined(meta=b.meta(), seq=2, reason="bad"),
    )
    view = View(event_log)
    model = view.model
    for record in records:  # as its follow loop does, up to the quarantine
        model.fold(model.state, record)
        view._folded(record)
    assert model.state.refold_due  # the follow loop now reads the log to fold it again
    handle = view._handler(JOB, model.job)
    asking = asyncio.create_task(handle(msgspec.json.encode(JobQuery(job_id="bad")), ALICE))
    await asyncio.sleep(0.2)
    model.state.become(refold(model.state, records))
    await view._caught_up()  # the log is folded to its end: what the follow loop calls
    answer = await asyncio.wait_for(asking, 5)
    await view.commands.close()
    assert isinstance(answer, Answer)
    assert [(e.field, e.value) for e in answer.errors] == [("job_id", "bad")]
