"""The read model: answers from one fold, pages newest first, the planner's recorded policy."""

import msgspec

from allot.bus.codec import encode
from allot.bus.eventlog import make_record
from allot.core import DEFAULT_POLICY, policy_hash
from allot.core.fold import refold
from allot.core.trail import trail
from allot.proto.events import (
    Event,
    EventQuarantined,
    GpuInfo,
    JobRequeued,
    PendingReason,
    PolicyAdopted,
    StopRequested,
    UsageCharged,
)
from allot.proto.queries import ExplainQuery, JobQuery, JobsQuery, NodesQuery, QueueQuery
from allot.proto.subjects import subject_for
from allot.services.runtime import Clock
from allot.services.view.model import MAX_ANSWER_BYTES, ReadModel
from tests import builders as b

S = 10**9


class FixedClock(Clock):
    def __init__(self, now: int):
        self.at = now

    def now(self) -> int:
        return self.at

    def monotonic(self) -> float:
        return self.at / S


def model_of(*events: Event, now: int = 100 * S) -> ReadModel:
    model = ReadModel(FixedClock(now), refresh_s=1.0)
    for seq, event in enumerate(events, start=1):
        model.fold(model.state, make_record(seq, subject_for(event), encode(event), {}))
    return model


def test_jobs_come_newest_first_page_by_page_and_filtered() -> None:
    model = model_of(
        b.node("n1", 1),
        *(b.submitted(f"j{n}", 1, by="alice" if n % 2 else "bob") for n in range(7)),
        b.plan(("j0", "n1", [0])),
    )
    first = model.jobs(JobsQuery(limit=3))
    assert [j["job_id"] for j in first.data] == ["j6", "j5", "j4"]
    assert first.more
    assert first.seq == 9
    second = model.jobs(JobsQuery(limit=3, before=first.next_before))
    assert [j["job_id"] for j in second.data] == ["j3", "j2", "j1"]
    last = model.jobs(JobsQuery(limit=3, before=second.next_before))
    assert [j["job_id"] for j in last.data] == ["j0"]
    assert not last.more

    alice = model.jobs(JobsQuery(users=["alice"]))
    assert [j["job_id"] for j in alice.data] == ["j5", "j3", "j1"]
    admitted = model.jobs(JobsQuery(states=["admitted"]))
    assert [j["job_id"] for j in admitted.data] == ["j0"]
    waiting = model.jobs(JobsQuery(states=["pending"], limit=2))
    assert [j["job_id"] for j in waiting.data] == ["j6", "j5"]
    assert waiting.more
    assert model.jobs(JobsQuery(accounts=["lab"])).data != []  # an account and those below it
    assert model.jobs(JobsQuery(accounts=["la"])).data == []  # not a prefix of its name


def test_an_answer_stays_below_the_payload_limit_whatever_the_specs_hold() -> None:
    huge = ["x" * 100_000]
    model = model_of(*(b.submitted(f"j{n}", 1, command=huge) for n in range(20)))
    answer = model.jobs(JobsQuery(limit=20))
    assert answer.more
    assert 0 < len(answer.data) < 20
    assert len(msgspec.json.encode(answer)) < MAX_ANSWER_BYTES + 200_000


def test_the_queue_is_ordered_by_the_policy_the_latest_plan_names() -> None:
    fifo = msgspec.structs.replace(DEFAULT_POLICY, name="fifo-lab", order="fifo")
    adopted = PolicyAdopted(
        meta=b.meta(),
        name=fifo.name,
        policy_hash=policy_hash(fifo),
        policy_json=msgspec.json.encode(fifo).decode(),
    )
    # Fair share puts the account without usage ahead; FIFO keeps submission order.
    submissions = (
        b.node("n1", 1),
        b.submitted("held", 1, account="z-team"),
        b.plan(("held", "n1", [0])),
        b.started("held", "n1", [0]),
        UsageCharged(
            meta=b.meta(),
            path="z-team",
            job_id="held",
            attempt=0,
            from_ns=1000,
            to_ns=2000,
            gpu_ms=1000,
        ),
        b.submitted("z-first", 1, account="z-team", at=2 * S),
        b.submitted("a-second", 1, account="a-team", at=3 * S),
    )
    by_default = model_of(*submissions).queue(QueueQuery())
    assert [r["job_id"] for r in by_default.data["rows"]] == ["a-second", "z-first"]
    assert by_default.data["policy_hash"] is None  # no plan named a policy the log holds

    fifo_plan = msgspec.structs.replace(b.plan(), policy="fifo-lab", policy_hash=policy_hash(fifo))
    answer = model_of(*submissions, adopted, fifo_plan).queue(QueueQuery())
    assert [r["job_id"] for r in answer.data["rows"]] == ["z-first", "a-second"]
    assert (answer.data["policy"], answer.total) == ("fifo-lab", 2)
    page = model_of(*submissions, adopted, fifo_plan).queue(QueueQuery(limit=1, offset=1))
    assert [r["position"] for r in page.data["rows"]] == [2]
    assert not page.more


def test_explain_answers_with_the_trail_the_whole_log_would_give() -> None:
    events = (
        b.node("n1", 1),
        b.submitted("j", 1, at=S),
        msgspec.structs.replace(
            b.plan(), pending=[PendingReason(job_id="j", code="NO_FIT", params={"need": 1})]
        ),
        b.plan(("j", "n1", [0])),
        b.started("j", "n1", [0]),
        b.exited("j", "n1", 0),
    )
    model = model_of(*events)
    view = model.explain(ExplainQuery(job_id="j")).data
    records = [make_record(n, subject_for(e), encode(e), {}) for n, e in enumerate(events, 1)]
    assert view["trail"] == [msgspec.to_builtins(step) for step in trail(records, "j")]
    assert [step["what"] for step in view["trail"]] == [
        "submitted", "waiting", "admitted", "started", "exited",
    ]  # fmt: skip
    assert (view["status"], view["exit_code"]) == ("succeeded", 0)


def test_questions_about_what_is_not_there_name_the_field() -> None:
    model = model_of(b.node("n1", 1))
    [error] = model.job(JobQuery(job_id="j-nope")).errors
    assert (error.field, error.value, error.message) == ("job_id", "j-nope", "no such job")
    [error] = model.nodes(NodesQuery(node_id="n9")).errors
    assert error.field == "node_id"
    assert "n1" in error.message


def requeued_first() -> ReadModel:
    """j1 submitted first, stopped and requeued after j2 and j3 were submitted."""
    return model_of(
        b.node("n1", 1),
        b.submitted("j1", 1, resumable=True),
        b.plan(("j1", "n1", [0])),
        b.started("j1", "n1", [0]),
        StopRequested(meta=b.meta(), job_id="j1", grace_ns=S, reason="for j2"),
        b.submitted("j2", 1),
        b.submitted("j3", 1),
        msgspec.structs.replace(b.exited("j1", "n1", None), stopped_in_ns=S),
        b.preempted("j1"),
        JobRequeued(meta=b.meta(), job_id="j1", reason="preempted"),
    )


def test_waiting_jobs_are_listed_by_submission_when_one_was_requeued() -> None:
    model = requeued_first()
    assert [model.state.jobs[j].status for j in ("j1", "j2", "j3")] == ["pending"] * 3
    everything = model.jobs(JobsQuery(states=["pending", "running"]))
    waiting = model.jobs(JobsQuery(states=["pending"]))
    assert [j["job_id"] for j in waiting.data] == [j["job_id"] for j in everything.data]
    assert [j["job_id"] for j in waiting.data] == ["j3", "j2", "j1"]


def test_pages_of_waiting_jobs_neither_skip_nor_repeat_a_requeued_one() -> None:
    model = requeued_first()
    listed: list[str] = []
    before = None
    for _ in range(4):
        page = model.jobs(JobsQuery(states=["pending"], limit=1, before=before))
        listed += [j["job_id"] for j in page.data]
        if not page.more:
            break
        before = page.next_before
    assert listed == ["j3", "j2", "j1"]


def test_a_queue_computed_before_a_refold_is_not_taken_for_the_refolded_one() -> None:
    # The view's service refolds the state after the quarantine is folded, reading the log
    # again; a refresh in between (its tick) computes the queue from the state that still
    # holds the quarantined submission, at the same sequence as the refolded state.
    events = (b.node("n1", 1), b.submitted("bad", 1), b.submitted("good", 1))
    quarantine = EventQuarantined(meta=b.meta(), seq=2, reason="bad")
    model = model_of(*events, quarantine)
    assert model.state.refold_due
    model.refresh(force=True)
    records = [make_record(n, subject_for(e), encode(e), {}) for n, e in enumerate(events, 1)]
    model.state.become(refold(model.state, records))
    answer = model.queue(QueueQuery(at_least=model.state.seq))
    assert [row["job_id"] for row in answer.data["rows"]] == ["good"]


def test_a_queue_of_long_names_is_cut_below_the_payload_limit_and_goes_on() -> None:
    account = "/".join(["a" * 63] * 8)  # the longest an account may be
    model = model_of(
        b.node("n1", 1),
        *(
            b.submitted(f"{n:05d}" + "j" * 123, 2, account=account, name="x" * 128)
            for n in range(1500)
        ),
    )
    positions: list[int] = []
    for _ in range(10):
        page = model.queue(QueueQuery(limit=5000, offset=len(positions)))
        assert len(msgspec.json.encode(page)) < MAX_ANSWER_BYTES + 200_000
        assert page.total == 1500
        positions += [row["position"] for row in page.data["rows"]]
        if not page.more:
            break
    assert positions == list(range(1, 1501))


def test_the_trail_of_a_job_that_waited_through_many_plans_is_cut_below_the_limit() -> None:
    plans = (
        msgspec.structs.replace(
            b.plan(),
            now=n * S,
            pending=[PendingReason(job_id="j", code="NO_FIT", params={"free": n, "x": "y" * 50})],
        )
        for n in range(1, 8001)
    )
    model = model_of(b.node("n1", 1), b.submitted("big", 1), b.submitted("j", 1), *plans)
    answer = model.explain(ExplainQuery(job_id="j"))
    assert len(msgspec.json.encode(answer)) < MAX_ANSWER_BYTES + 200_000
    steps = answer.data["trail"]
    assert steps[0]["what"] == "submitted"
    assert steps[1]["what"] == "omitted"
    assert steps[-1]["text"] == model.trails.of("j")[-1].text  # the latest are kept


def test_the_nodes_of_a_large_cluster_come_in_pages_below_the_payload_limit() -> None:
    def node(n: int) -> Event:
        gpus = [
            GpuInfo(index=g, model="NVIDIA H100 80GB HBM3", memory_mib=81559,
                    uuid=f"GPU-{n:08x}-aaaa-bbbb-cccc-{g:012x}", pci_bus_id=f"0000:{g:02x}:00.0")
            for g in range(8)
        ]  # fmt: skip
        return msgspec.structs.replace(b.node(f"node-{n:04d}", 8, rack="r1"), gpus=gpus)

    model = model_of(*(node(n) for n in range(1000)))
    listed: list[str] = []
    after = None
    for _ in range(10):
        page = model.nodes(NodesQuery(after=after))
        assert len(msgspec.json.encode(page)) < MAX_ANSWER_BYTES + 200_000
        listed += [view["node_id"] for view in page.data]
        if not page.more:
            break
        after = listed[-1]
    assert listed == sorted(model.state.nodes)


def test_asking_for_a_sequence_past_the_log_costs_no_new_queue() -> None:
    model = model_of(b.node("n1", 1), *(b.submitted(f"j{n}", 1) for n in range(3)))
    model.queue(QueueQuery(at_least=model.state.seq))
    computed = model.derived
    for question in (QueueQuery(at_least=10**15), ExplainQuery(job_id="j1", at_least=10**15)):
        answer = getattr(model, type(question).__name__.removesuffix("Query").lower())(question)
        assert answer.seq == model.state.seq
    assert model.derived is computed  # the queue of this sequence is not planned again
