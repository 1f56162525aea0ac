"""Job arrays as the read model answers about them: listing and paging through an array,
held tasks among the waiting, why a held task waits, a task's trail, the simulator's view
of a log with arrays."""

import random

from allot.bus.codec import encode
from allot.bus.eventlog import make_record
from allot.core.arrays import parse
from allot.proto.events import (
    ArraySubmitted,
    Event,
    JobCancelRequested,
    JobsSubmitted,
    JobSubmitted,
    Submission,
)
from allot.proto.queries import ExplainQuery, JobsQuery
from allot.proto.subjects import subject_for
from allot.services.view.model import ReadModel
from allot.sim.trace import _log_jobs
from tests import builders as b
from tests.unit.test_read_model import FixedClock, S


def model_of(*events: Event) -> ReadModel:
    model = ReadModel(FixedClock(100 * S), refresh_s=1.0)
    for seq, event in enumerate(events, start=1):
        model.fold(model.state, make_record(seq, subject_for(event), encode(event), {}))
    return model


def array(array_id: str, text: str) -> ArraySubmitted:
    return ArraySubmitted(meta=b.meta(), job_id=array_id, spec=b.spec(1), array=parse(text))


def ids(model: ReadModel, limit: int, **filters: object) -> list[str]:
    """Every job the filters ask for, page by page as a client reads them."""
    found: list[str] = []
    before, before_index, before_id = None, 0, ""
    while True:
        cursor = {"before": before, "before_index": before_index, "before_id": before_id}
        answer = model.jobs(JobsQuery(limit=limit, **cursor, **filters))  # type: ignore[arg-type]
        found += [job["job_id"] for job in answer.data]
        if not answer.more:
            return found
        before, before_index = answer.next_before, answer.next_before_index
        before_id = answer.next_before_id


def test_pages_cut_inside_arrays_and_batches_go_on_where_they_stopped() -> None:
    for seed in range(80):
        rnd = random.Random(seed)
        events: list[Event] = [b.node("n1", 2)]
        together: list[JobSubmitted] = []  # submissions appended together (docs/adr/0036)
        for n in range(rnd.randint(1, 8)):
            if rnd.random() < 0.5:
                submitted: JobSubmitted = b.submitted(f"j{rnd.randint(0, 99)}-{n}")
            else:
                cap = f"%{rnd.randint(1, 3)}" if rnd.random() < 0.5 else ""
                submitted = array(f"a{n}", f"0-{rnd.randint(0, 12)}{cap}")
            (together if rnd.random() < 0.5 else events).append(submitted)
            if together and rnd.random() < 0.3:
                entries = [Submission(event=e) for e in together]
                events.append(JobsSubmitted(meta=b.meta(), jobs=entries))
                together = []
        if together:
            events.append(
                JobsSubmitted(meta=b.meta(), jobs=[Submission(event=e) for e in together])
            )
        model = model_of(*events)
        for filters in ({}, {"states": ["pending"]}, {"states": ["pending", "running"]}):
            whole = ids(model, 5000, **filters)
            assert len(set(whole)) == len(whole) == sum(
                1 for job in model.state.jobs.values()
                if not filters or str(job.status) in filters["states"]
            )  # fmt: skip
            for limit in (1, 2, 3, 7):
                assert ids(model, limit, **filters) == whole, (seed, filters, limit)


def test_tasks_held_for_the_array_s_limit_are_listed_as_waiting() -> None:
    model = model_of(array("a", "0-4%1"))
    assert ids(model, 100, states=["pending"]) == ["a_4", "a_3", "a_2", "a_1", "a_0"]
    assert ids(model, 2, array="a") == ["a_4", "a_3", "a_2", "a_1", "a_0"]


def test_a_held_task_is_explained_by_its_array_s_limit() -> None:
    model = model_of(b.node("n1", 1), array("a", "0-3%2"))
    explained = model.explain(ExplainQuery(job_id="a_3")).data
    assert explained["reason"] == "ARRAY_LIMIT(array a, max_running 2)"
    first = model.explain(ExplainQuery(job_id="a")).data["task"]
    assert first["job_id"] == "a_0"


def test_a_task_that_ended_before_its_array_was_cancelled_keeps_its_own_end() -> None:
    events = [b.node("n1", 1), array("a", "0-3%2"), b.plan(("a_0", "n1", [0])),
              b.started("a_0", "n1", [0]), b.exited("a_0", "n1"),
              JobCancelRequested(meta=b.meta(5_000), job_id="a")]  # fmt: skip
    model = model_of(*events)
    done = [step["what"] for step in model.explain(ExplainQuery(job_id="a_0")).data["trail"]]
    assert done == ["submitted", "admitted", "started", "exited"]
    cancelled = [step["what"] for step in model.explain(ExplainQuery(job_id="a_2")).data["trail"]]
    assert cancelled == ["submitted", "cancel requested"]


def test_the_simulator_reads_each_task_of_an_array_as_a_job() -> None:
    events = [b.node("n1", 1), array("a", "0-1"), b.plan(("a_1", "n1", [0])),
              b.started("a_1", "n1", [0]), b.exited("a_1", "n1")]  # fmt: skip
    assert [job.job_id for job in _log_jobs(events)] == ["a_1"]
