"""Job arrays in the fold and the planner (``allot.core.arrays``, docs/adr/0035): one event,
a job per index, a limit that keeps the rest out of the queue, cancel of one task or all."""

import random
from collections.abc import Callable

import msgspec
import pytest

from allot.core import DEFAULT_POLICY, apply, plan, queue
from allot.core.arrays import ArraySyntaxError, array_problems, indices, parse, text
from allot.core.model import JobStatus, State
from allot.core.snapshot import SnapshotError, decode_snapshot, encode_snapshot
from allot.core.validate import known_submission
from allot.proto.codes import ARRAY_LIMIT
from allot.proto.commands import SubmitRequest
from allot.proto.events import (
    ArraySubmitted,
    ArrayTasks,
    Event,
    IndexRange,
    JobCancelRequested,
)
from allot.proto.limits import MAX_ARRAY_TASKS
from tests import builders as b


def array_submitted(
    array_id: str, text: str, key: str | None = None, gpus: int = 1
) -> ArraySubmitted:
    return ArraySubmitted(
        meta=b.meta(),
        job_id=array_id,
        spec=b.spec(gpus),
        idempotency_key=key,
        array=parse(text),
    )


def cancel(job_id: str) -> JobCancelRequested:
    return JobCancelRequested(meta=b.meta(2_000), job_id=job_id)


def test_indices_are_read_as_slurm_writes_them() -> None:
    array = parse("0-4, 10,20-30:5%2")
    assert array.max_running == 2
    assert indices(array) == [0, 1, 2, 3, 4, 10, 20, 25, 30]
    assert text(array) == "0-4,10,20-30:5%2"
    assert indices(parse("3,1-3")) == [1, 2, 3]  # named twice: one task


@pytest.mark.parametrize("bad", ["", "a-3", "1-", "0-9%", "0-9%x", "1--3", "0-9:0:1", "9" * 13])
def test_text_that_is_no_array_says_what_would_be(bad: str) -> None:
    with pytest.raises(ArraySyntaxError, match="0-999"):
        parse(bad)


def test_arrays_that_cannot_be_are_refused_naming_the_field() -> None:
    problems = array_problems(ArrayTasks(indices=[IndexRange(first=9, last=3)]))
    assert [(p.field, p.value) for p in problems] == [("array.indices[0]", "9-3")]
    problems = array_problems(ArrayTasks(indices=[IndexRange(first=0, last=9, step=0)]))
    assert [p.field for p in problems] == ["array.indices[0].step"]
    too_many = array_problems(parse(f"0-{MAX_ARRAY_TASKS}"))
    assert [(p.field, p.value) for p in too_many] == [("array", str(MAX_ARRAY_TASKS + 1))]
    assert [p.field for p in array_problems(parse("0-9%0"))] == ["array.max_running"]
    assert array_problems(parse(f"0-{MAX_ARRAY_TASKS - 1}%50")) == []


def test_a_forged_event_of_a_million_tasks_is_ignored_before_any_is_made() -> None:
    huge = array_submitted("a", "0-999999")
    state = b.fold(huge)  # refused by counting them, not by listing them
    assert state.jobs == {}
    assert state.arrays == {}
    assert "at most 10000 tasks" in state.ignored[-1].reason


def test_one_event_makes_a_job_per_index_waiting_in_index_order() -> None:
    state = b.fold(b.node("n1", 2), array_submitted("a", "0-11"))
    tasks = state.arrays["a"].tasks
    assert tasks == [f"a_{i}" for i in range(12)]
    assert all(state.jobs[t].array_index == int(t[2:]) for t in tasks)
    assert len({id(state.jobs[t].spec) for t in tasks}) == 1  # one spec for all
    decided = plan(state, 2_000, DEFAULT_POLICY)
    # by index, not by id as text (a_10 would come before a_2)
    assert [a.job_id for a in decided.admissions] == ["a_0", "a_1"]
    order = [job.job_id for job in queue(state, 2_000, DEFAULT_POLICY)]
    assert order == [f"a_{i}" for i in range(12)]


def test_past_its_limit_an_array_waits_outside_the_queue_and_refills_it() -> None:
    state = b.fold(b.node("n1", 8), array_submitted("a", "0-9%3"))
    assert list(state.pending) == ["a_0", "a_1", "a_2"]
    held = state.jobs["a_3"]
    assert held.status == JobStatus.PENDING
    assert held.array_held
    assert held.reason is not None
    assert held.reason.code == ARRAY_LIMIT
    assert state.wanted["lab/team"] == 3  # what could run is wanted, not what is held
    decided = plan(state, 2_000, DEFAULT_POLICY)
    assert [a.job_id for a in decided.admissions] == ["a_0", "a_1", "a_2"]  # 5 GPUs left idle
    apply(state, state.seq + 1, b.plan(*decided.admissions))
    apply(state, state.seq + 1, b.started("a_1", "n1", state.jobs["a_1"].placements["n1"]))
    apply(state, state.seq + 1, b.exited("a_1", "n1"))
    assert list(state.pending) == ["a_3"]  # one ended: the next joins the queue
    assert not state.jobs["a_3"].array_held
    assert state.jobs["a_3"].reason is None
    assert state.arrays["a"].active == 3


def test_cancelling_a_held_task_releases_nothing_and_the_next_is_skipped_past() -> None:
    state = b.fold(b.node("n1", 8), array_submitted("a", "0-4%1"))
    apply(state, state.seq + 1, cancel("a_1"))  # held: ends, nothing joins the queue
    assert state.jobs["a_1"].status == JobStatus.CANCELLED
    assert list(state.pending) == ["a_0"]
    apply(state, state.seq + 1, cancel("a_0"))  # in the queue: the next held one joins it
    assert list(state.pending) == ["a_2"]
    assert state.wanted["lab/team"] == 1


def test_cancelling_the_array_ends_every_task_and_stops_running_ones() -> None:
    state = b.fold(b.node("n1", 2), array_submitted("a", "0-5%3"))
    decided = plan(state, 2_000, DEFAULT_POLICY)
    apply(state, state.seq + 1, b.plan(*decided.admissions))
    apply(state, state.seq + 1, cancel("a"))
    statuses = {t: state.jobs[t].status for t in state.arrays["a"].tasks}
    assert statuses == {
        "a_0": "admitted",
        "a_1": "admitted",
        **{f"a_{i}": "cancelled" for i in range(2, 6)},
    }
    assert all(state.jobs[t].cancel_requested for t in ("a_0", "a_1"))
    assert state.pending == {}
    apply(state, state.seq + 1, b.started("a_0", "n1", state.jobs["a_0"].placements["n1"]))
    apply(state, state.seq + 1, b.exited("a_0", "n1", code=None))
    assert state.pending == {}  # a cancelled array releases no more tasks
    before = state.ignored_count
    apply(state, state.seq + 1, cancel("a"))
    assert state.ignored_count == before + 1


def test_a_resubmission_with_its_key_is_the_same_array_and_another_array_is_refused() -> None:
    request = SubmitRequest(spec=b.spec(), idempotency_key="k", array=parse("0-9"))
    state = b.fold(array_submitted("a", "0-9", key="k"))
    assert known_submission(request, "", state) == ("a", [])
    other = msgspec.structs.replace(request, array=parse("0-19"))
    known, errors = known_submission(other, "", state)
    assert known is None
    assert [e.field for e in errors] == ["idempotency_key"]
    plain = msgspec.structs.replace(request, array=None)
    assert known_submission(plain, "", state)[1] != []


def test_an_array_whose_task_is_a_job_already_is_ignored_whole() -> None:
    state = b.fold(b.submitted("a_3"), array_submitted("a", "0-9"))
    assert "a" not in state.arrays
    assert list(state.jobs) == ["a_3"]


def test_a_snapshot_keeps_arrays_and_held_tasks_exactly() -> None:
    state = b.fold(b.node("n1", 8), array_submitted("a", "0-9%3"), cancel("a_5"))
    again = decode_snapshot(encode_snapshot(state, "v"), "v")
    assert again.arrays == state.arrays
    assert again.jobs == state.jobs
    apply(state, state.seq + 1, cancel("a_0"))
    apply(again, again.seq + 1, cancel("a_0"))
    assert list(again.pending) == list(state.pending) == ["a_1", "a_2", "a_3"]


def _active_miscounted(state: State) -> None:
    state.arrays["a"].active = 9  # the array would never release another task


def _held_task_let_go(state: State) -> None:
    task = state.jobs["a_7"]
    task.array_held = False  # queued past the array's limit
    state.enqueue(task)


def _released_past_its_end(state: State) -> None:
    state.arrays["a"].released = 11


@pytest.mark.parametrize(
    ("forge", "why"),
    [
        (_active_miscounted, r"arrays\[a\]\.active: 9, but 3 of its released tasks have not ended"),
        (
            _held_task_let_go,
            r"jobs\[a_7\]: a task its array has not released, neither held nor ended",
        ),
        (_released_past_its_end, r"arrays\[a\]\.released: not within 0 to its 10 tasks"),
    ],
)
def test_a_snapshot_of_arrays_no_fold_makes_is_refused_saying_where(
    forge: Callable[[State], None], why: str
) -> None:
    state = b.fold(b.node("n1", 8), array_submitted("a", "0-9%3"), cancel("a_5"))
    forge(state)
    with pytest.raises(SnapshotError, match=f"its state is not one a fold makes: {why}"):
        decode_snapshot(encode_snapshot(state, "v"), "v")


def test_a_cycle_looks_at_as_many_tasks_of_an_array_of_10_000_as_of_one_of_100() -> None:
    """One GPU free and an array of 2-GPU tasks waiting: a cycle looks at the policy's
    depth of it, however many wait (``allot bench planner`` measures the time)."""

    def looked_at(tasks: int) -> int:
        last = f"0-{tasks - 1}"
        array = array_submitted("a", last, gpus=2)
        state = b.fold(b.node("n1", 8), b.submitted("big", 7), array)
        apply(state, state.seq + 1, b.plan(("big", "n1", list(range(7)))))
        return len(plan(state, 2_000, DEFAULT_POLICY).waiting)

    assert looked_at(10_000) == looked_at(100) == DEFAULT_POLICY.queue_depth


def test_a_plan_cannot_admit_a_held_task_nor_change_its_reason() -> None:
    state = b.fold(b.node("n1", 4), array_submitted("a", "0-3%1"))
    reason = state.jobs["a_2"].reason
    apply(state, state.seq + 1, b.plan(("a_2", "n1", [0])))
    assert state.jobs["a_2"].status == JobStatus.PENDING
    assert state.jobs["a_2"].array_held
    assert state.jobs["a_2"].reason == reason
    assert "held" in state.ignored[-1].reason


def test_an_array_whose_task_is_named_like_an_array_is_ignored_and_changes_nothing() -> None:
    state = b.fold(b.node("n1", 4), array_submitted("q_1", "0-1"))
    before = encode_snapshot(state, "v")
    late = msgspec.structs.replace(array_submitted("q", "0-2"), meta=b.meta(at=10**13))
    apply(state, state.seq + 1, late)
    assert "q" not in state.arrays
    state.seq -= 1  # the same state but for the event's sequence and the note of it
    state.ignored.pop()
    state.ignored_count -= 1
    assert encode_snapshot(state, "v") == before  # owed was not accrued to its time


@pytest.mark.parametrize("seed", range(20))
def test_every_state_arrays_reach_is_one_a_snapshot_keeps(seed: int) -> None:
    """A seeded life of arrays (submitted with and without a limit, tasks planned, started,
    ended and cancelled, held or not, arrays cancelled whole): after every event the state
    is one a snapshot keeps exactly, never one it refuses as no fold's."""
    rng = random.Random(seed)
    state = b.fold(b.node("n1", 8), b.node("n2", 8))
    arrays: list[str] = []
    running: dict[str, tuple[str, int]] = {}  # job -> its node and GPU
    free = {"n1": set(range(8)), "n2": set(range(8))}
    for _ in range(150):
        roll = rng.random()
        if roll < 0.1 or not arrays:
            arrays.append(f"a{len(arrays)}")
            limit = rng.choice(["", f"%{rng.randint(1, 4)}"])
            event: Event = array_submitted(arrays[-1], f"0-{rng.randint(0, 11)}{limit}")
        elif roll < 0.4 and state.pending:
            job_id, node = rng.choice(list(state.pending)), rng.choice(["n1", "n2"])
            if not free[node]:
                continue
            gpu = min(free[node])
            apply(state, state.seq + 1, b.plan((job_id, node, [gpu])))
            free[node].discard(gpu)
            running[job_id] = (node, gpu)
            event = b.started(job_id, node, [gpu])
        elif roll < 0.7 and running:
            job_id = rng.choice(list(running))
            event = b.exited(job_id, *running[job_id][:1], code=rng.choice([0, 1]))
        elif roll < 0.9:
            event = cancel(rng.choice(state.arrays[rng.choice(arrays)].tasks))
        else:
            event = cancel(rng.choice(arrays))
        apply(state, state.seq + 1, event)
        for job_id, (node, gpu) in list(running.items()):
            if state.jobs[job_id].status.terminal:
                free[node].add(gpu)
                del running[job_id]
        again = decode_snapshot(encode_snapshot(state, "v"), "v")
        assert (again.arrays, again.jobs) == (state.arrays, state.jobs)
