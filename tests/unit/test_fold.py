import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from allot.bus.codec import decode, encode
from allot.core import DEFAULT_POLICY, JobStatus, State, apply, apply_record, plan
from allot.proto.events import (
    AccountDefined,
    AccountSettings,
    AccountUpdated,
    BudgetGranted,
    Event,
    GraceTooShort,
    Hold,
    JobCancelled,
    JobCancelRequested,
    JobCheckpointed,
    JobPreempted,
    JobRequeued,
    KillRequested,
    MaxWaitExceeded,
    NodeCordoned,
    NodeDrained,
    NodeHealthChanged,
    NodeLost,
    NodeUncordoned,
    Placement,
    PolicyAdopted,
    Preemption,
    StopRequested,
    UsageCharged,
)
from tests import builders as b
from tests.builders import fold


def test_a_job_runs_from_submission_to_success() -> None:
    state = fold(
        b.node("n1", 4),
        b.submitted("j1", gpus=2),
        b.plan(("j1", "n1", [0, 1])),
        b.started("j1", "n1", [0, 1]),
    )
    job = state.jobs["j1"]
    assert job.status == JobStatus.RUNNING
    assert state.nodes["n1"].free_gpus() == [2, 3]
    assert "j1" not in state.pending

    apply(state, 5, b.exited("j1", "n1", 0))
    assert job.status == JobStatus.SUCCEEDED
    assert state.nodes["n1"].free_gpus() == [0, 1, 2, 3]
    assert state.seq == 5


def test_a_non_zero_exit_fails_the_job() -> None:
    state = fold(
        b.node("n1"),
        b.submitted("j1"),
        b.plan(("j1", "n1", [0])),
        b.started("j1", "n1", [0]),
        b.exited("j1", "n1", 3),
    )
    assert state.jobs["j1"].status == JobStatus.FAILED
    assert state.jobs["j1"].exit_code == 3


def test_events_that_do_not_fit_are_ignored_with_a_reason() -> None:
    state = fold(
        b.submitted("j1"),
        b.submitted("j1"),  # duplicate
        b.started("ghost", "n1", [0]),  # unknown job
        b.plan(("j1", "n9", [0])),  # unknown node
    )
    reasons = [(i.seq, i.reason) for i in state.ignored]
    assert reasons == [
        (2, "job j1 already submitted"),
        (3, "unknown job ghost"),
        (4, "j1: node n9 is not schedulable"),
    ]
    assert state.jobs["j1"].status == JobStatus.PENDING


def test_an_admission_of_gpus_already_taken_is_ignored() -> None:
    state = fold(
        b.node("n1", 2),
        b.submitted("a", 2),
        b.submitted("b", 1),
        b.plan(("a", "n1", [0, 1])),
        b.plan(("b", "n1", [1])),
    )
    assert state.jobs["b"].status == JobStatus.PENDING
    assert state.nodes["n1"].allocated == {0: "a", 1: "a"}
    assert state.ignored[-1].reason == "b: GPUs [1] not free on n1"


def test_cancelling_a_pending_job_ends_it_at_once() -> None:
    state = fold(b.submitted("j1"), JobCancelRequested(meta=b.meta(), job_id="j1"))
    assert state.jobs["j1"].status == JobStatus.CANCELLED
    assert not state.pending


def test_cancelling_a_running_job_ends_it_when_it_exits() -> None:
    state = fold(
        b.node("n1"),
        b.submitted("j1"),
        b.plan(("j1", "n1", [0])),
        b.started("j1", "n1", [0]),
        JobCancelRequested(meta=b.meta(), job_id="j1"),
    )
    assert state.jobs["j1"].status == JobStatus.RUNNING
    assert state.jobs["j1"].cancel_requested
    apply(state, 6, b.exited("j1", "n1", -15))
    assert state.jobs["j1"].status == JobStatus.CANCELLED


def test_a_lost_node_loses_its_jobs_or_requeues_the_resumable_ones() -> None:
    state = fold(
        b.node("n1", 4),
        b.submitted("plain", 1),
        b.submitted("resumable", 1, resumable=True),
        b.plan(("plain", "n1", [0]), ("resumable", "n1", [1])),
        b.started("plain", "n1", [0]),
        b.lost("n1"),
    )
    assert state.jobs["plain"].status == JobStatus.LOST
    resumable = state.jobs["resumable"]
    assert resumable.status == JobStatus.PENDING
    assert resumable.attempts == 1
    assert resumable.placements == {}
    assert "resumable" in state.pending
    assert state.nodes["n1"].allocated == {}
    assert not state.nodes["n1"].schedulable
    # A late exit report from the lost node changes nothing.
    apply(state, 7, b.exited("plain", "n1", 0))
    assert state.jobs["plain"].status == JobStatus.LOST


def test_a_node_that_registers_again_is_back() -> None:
    state = fold(b.node("n1"), b.lost("n1"), b.node("n1"))
    assert state.nodes["n1"].schedulable


def test_a_stopped_job_frees_its_gpus_is_accounted_and_requeued() -> None:
    state = fold(
        b.node("n1"),
        b.submitted("j1", resumable=True),
        b.plan(("j1", "n1", [0])),
        b.started("j1", "n1", [0]),
        StopRequested(meta=b.meta(), job_id="j1", grace_ns=5, reason="for j2"),
        msgspec.structs.replace(b.exited("j1", "n1", 0), stopped_in_ns=3),
    )
    job = state.jobs["j1"]
    assert job.status == JobStatus.PREEMPTED  # exit 0 after SIGTERM: stopped, not succeeded
    assert state.nodes["n1"].allocated == {}
    apply(state, 7, b.preempted("j1", lost_gpu_ms=1500))
    assert (job.preemptions, job.lost_gpu_ms) == (1, 1500)
    apply(state, 8, JobRequeued(meta=b.meta(), job_id="j1", reason="preempted"))
    assert job.status == JobStatus.PENDING
    assert "j1" in state.pending
    assert job.stop is None
    assert job.attempts == 1


def test_a_preempted_job_that_cannot_resume_ends_lost() -> None:
    state = fold(
        b.node("n1"),
        b.submitted("j1"),
        b.plan(("j1", "n1", [0])),
        b.started("j1", "n1", [0]),
        StopRequested(meta=b.meta(), job_id="j1", grace_ns=5, reason="for j2"),
        KillRequested(meta=b.meta(), job_id="j1", reason="grace over"),
        b.exited("j1", "n1", -9),
        b.preempted("j1", lost_gpu_ms=9000),
    )
    job = state.jobs["j1"]
    assert job.status == JobStatus.LOST
    assert job.lost_gpu_ms == 9000
    assert job.kill_requested


def test_a_job_stopped_at_its_max_runtime_fails() -> None:
    state = fold(
        b.node("n1"),
        b.submitted("j1", resumable=True),
        b.plan(("j1", "n1", [0])),
        b.started("j1", "n1", [0]),
        StopRequested(
            meta=b.meta(), job_id="j1", grace_ns=5, reason="max_runtime 1h", kind="max_runtime"
        ),
        msgspec.structs.replace(b.exited("j1", "n1", 143), stopped_in_ns=3),
    )
    assert state.jobs["j1"].status == JobStatus.FAILED
    assert state.jobs["j1"].end_reason == "stopped: max_runtime 1h"


def test_an_old_sequence_is_not_folded_twice() -> None:
    state = fold(b.submitted("j1"))
    apply(state, 1, b.submitted("j2"))
    assert "j2" not in state.jobs


class _Undecodable:
    seq = 1
    type = "JobTeleported"
    event = None
    error = "unknown type"


def test_an_undecodable_record_is_ignored_and_counted() -> None:
    state = apply_record(State(), _Undecodable())
    assert state.seq == 1
    assert state.ignored[0].type == "JobTeleported"


def test_a_gang_runs_once_any_node_started_and_succeeds_when_every_node_exited_0() -> None:
    state = fold(
        b.node("n1", 4),
        b.node("n2", 4),
        b.submitted("g", 4, workers=2),
        b.plan(b.admission("g", ("n1", [0, 1, 2, 3]), ("n2", [0, 1, 2, 3]))),
        b.started("g", "n2", [0, 1, 2, 3]),
    )
    gang = state.jobs["g"]
    assert gang.status == JobStatus.RUNNING
    assert state.unbilled[("g", 0)].gpus == 8
    apply(state, 6, b.started("g", "n1", [0, 1, 2, 3]))
    apply(state, 7, b.exited("g", "n1"))
    assert gang.status == JobStatus.RUNNING  # n2's process still runs
    assert state.nodes["n1"].allocated  # the gang holds its GPUs until it ends
    apply(state, 8, b.exited("g", "n2"))
    assert gang.status == JobStatus.SUCCEEDED
    assert not state.nodes["n1"].allocated
    assert not state.nodes["n2"].allocated


def test_a_gang_fails_with_its_first_failing_process_and_frees_every_node() -> None:
    state = fold(
        b.node("n1", 4),
        b.node("n2", 4),
        b.submitted("g", 4, workers=2),
        b.plan(b.admission("g", ("n1", [0, 1, 2, 3]), ("n2", [0, 1, 2, 3]))),
        b.started("g", "n1", [0, 1, 2, 3]),
        b.started("g", "n2", [0, 1, 2, 3]),
        b.exited("g", "n2", 3),
        b.exited("g", "n1", 137),  # killed by its agent: too late to matter
    )
    gang = state.jobs["g"]
    assert gang.status == JobStatus.FAILED
    assert gang.exit_code == 3
    assert gang.end_reason == "exit 3 on n2"
    assert not state.nodes["n1"].allocated
    assert state.ignored[-1].type == "JobExited"


def test_an_admission_that_splits_a_worker_or_misses_gpus_is_ignored() -> None:
    base = [b.node("n1", 4), b.node("n2", 4), b.submitted("g", 4, workers=2)]
    split = fold(
        *base,
        b.plan(
            b.admission(
                "g",
                (
                    "n1",
                    [
                        0,
                        1,
                        2,
                        3,
                    ],
                ),
                ("n2", [0, 1]),
            ),
        ),
    )
    assert split.jobs["g"].status == JobStatus.PENDING
    odd = fold(*base, b.plan(b.admission("g", ("n1", [0, 1, 2, 3, 4]), ("n2", [0, 1, 2]))))
    assert odd.jobs["g"].status == JobStatus.PENDING
    assert "placements split a worker" in odd.ignored[-1].reason
    assert split.ignored[-1].reason == "g: 6 GPUs placed, the job needs 8"


def test_a_max_wait_report_marks_the_waiting_attempt_only() -> None:
    late = MaxWaitExceeded(
        meta=b.meta(), job_id="j", account="lab", attempt=0, waited_ns=5, max_wait_ns=1
    )
    state = fold(b.submitted("j"), late)
    assert state.jobs["j"].max_wait_exceeded
    again = fold(b.submitted("j"), msgspec.structs.replace(late, attempt=1))
    assert not again.jobs["j"].max_wait_exceeded
    assert again.ignored_count == 1


# --- properties ---------------------------------------------------------------------------

JOBS = ["a", "b", "c"]
NODES = ["n1", "n2"]
gpu_lists = st.lists(st.integers(0, 3), min_size=1, max_size=3)
events = st.one_of(
    st.builds(lambda j, g: b.submitted(j, g), st.sampled_from(JOBS), st.integers(1, 3)),
    st.builds(lambda j: b.submitted(j, 1, workers=2), st.sampled_from(JOBS)),
    st.builds(
        lambda j, r: b.submitted(j, 1, max_runtime_ns=r), st.sampled_from(JOBS), st.integers(1, 3)
    ),
    st.builds(
        lambda j, g, h: b.plan(b.admission(j, ("n1", g), ("n2", h))),
        st.sampled_from(JOBS),
        gpu_lists,
        gpu_lists,
    ),
    st.builds(
        lambda j, k, a: StopRequested(
            meta=b.meta(), job_id=j, grace_ns=1, reason="r", kind=k, attempt=a
        ),
        st.sampled_from(JOBS),
        st.sampled_from(["preempt", "max_runtime"]),
        st.integers(0, 1),
    ),
    st.builds(
        lambda j, a: KillRequested(meta=b.meta(), job_id=j, reason="r", attempt=a),
        st.sampled_from(JOBS),
        st.integers(0, 1),
    ),
    st.builds(
        lambda j, n, c, t: msgspec.structs.replace(b.exited(j, n, c), stopped_in_ns=t),
        st.sampled_from(JOBS),
        st.sampled_from(NODES),
        st.sampled_from([0, 1, None]),
        st.one_of(st.none(), st.integers(0, 10)),
    ),
    st.builds(
        lambda j, n, s: JobCheckpointed(meta=b.meta(), job_id=j, node_id=n, path="/c", step=s),
        st.sampled_from(JOBS),
        st.sampled_from(NODES),
        st.one_of(st.none(), st.integers(1, 3)),
    ),
    st.builds(
        lambda j, a: b.preempted(j, lost_gpu_ms=5, attempt=a),
        st.sampled_from(JOBS),
        st.integers(0, 1),
    ),
    st.builds(
        lambda j: GraceTooShort(meta=b.meta(), job_id=j, grace_ns=1, measured_ns=2),
        st.sampled_from(JOBS),
    ),
    st.builds(
        lambda victim, waiting, g: msgspec.structs.replace(
            b.plan(),
            preemptions=[Preemption(job_id=victim, code="TIER", params={"for": waiting})],
            holds=[Hold(job_id=waiting, placements=[Placement(node_id="n1", gpus=g)])],
        ),
        st.sampled_from(JOBS),
        st.sampled_from(JOBS),
        gpu_lists,
    ),
    st.builds(
        lambda n, d: NodeCordoned(meta=b.meta(), node_id=n, drain=d),
        st.sampled_from(NODES),
        st.booleans(),
    ),
    st.builds(lambda n: NodeDrained(meta=b.meta(), node_id=n), st.sampled_from(NODES)),
    st.builds(
        lambda h: PolicyAdopted(meta=b.meta(), name="p", policy_hash=h, policy_json="{}"),
        st.sampled_from(["a", "b"]),
    ),
    st.builds(
        lambda j, a: MaxWaitExceeded(
            meta=b.meta(), job_id=j, account="lab", attempt=a, waited_ns=2, max_wait_ns=1
        ),
        st.sampled_from(JOBS),
        st.integers(0, 1),
    ),
    st.builds(lambda n: b.node(n, 2), st.sampled_from(NODES)),
    st.builds(
        lambda j, n, g: b.plan((j, n, g)), st.sampled_from(JOBS), st.sampled_from(NODES), gpu_lists
    ),
    st.builds(b.started, st.sampled_from(JOBS), st.sampled_from(NODES), gpu_lists),
    st.builds(
        b.exited, st.sampled_from(JOBS), st.sampled_from(NODES), st.sampled_from([0, 1, None])
    ),
    st.builds(b.lost, st.sampled_from(NODES)),
    st.builds(lambda j: JobCancelRequested(meta=b.meta(), job_id=j), st.sampled_from(JOBS)),
    st.builds(
        lambda j, n: JobCancelled(meta=b.meta(), job_id=j, node_id=n),
        st.sampled_from(JOBS),
        st.sampled_from(NODES),
    ),
    st.builds(
        lambda j: JobPreempted(
            meta=b.meta(), job_id=j, lost_gpu_ms=0, checkpoint_age_ns=None, grace_used_ns=0
        ),
        st.sampled_from(JOBS),
    ),
    st.builds(lambda j: JobRequeued(meta=b.meta(), job_id=j, reason="r"), st.sampled_from(JOBS)),
    st.builds(
        lambda n, h: NodeHealthChanged(meta=b.meta(), node_id=n, healthy=h, reason="r"),
        st.sampled_from(NODES),
        st.booleans(),
    ),
    st.builds(
        lambda n, h, g: NodeHealthChanged(
            meta=b.meta(), node_id=n, healthy=h, reason="r", gpu=g, fault="ecc_uncorrected"
        ),
        st.sampled_from(NODES),
        st.booleans(),
        st.integers(0, 3),
    ),
    st.builds(lambda n: NodeCordoned(meta=b.meta(), node_id=n), st.sampled_from(NODES)),
    st.builds(lambda n: NodeUncordoned(meta=b.meta(), node_id=n), st.sampled_from(NODES)),
    st.builds(lambda n, g: b.node(n, g), st.sampled_from(NODES), st.integers(1, 4)),
    st.builds(
        lambda j, a, t, g: UsageCharged(
            meta=b.meta(),
            path="lab/team",
            job_id=j,
            attempt=a,
            from_ns=1000,
            to_ns=1000 + t,
            gpu_ms=g,
        ),
        st.sampled_from(JOBS),
        st.integers(0, 1),
        st.integers(1, 10**12),
        st.integers(0, 10**6),
    ),
    st.builds(
        lambda g: BudgetGranted(meta=b.meta(), path="lab", gpu_ms=g, period_ns=10**12, starts_at=0),
        st.integers(0, 10**6),
    ),
)


@settings(max_examples=300)
@given(st.lists(events, max_size=30))
def test_any_event_sequence_folds_and_replays_from_the_wire_identically(
    sequence: list[Event],
) -> None:
    first = fold(*sequence)
    replayed = fold(*(decode(encode(e)) for e in sequence))  # as read back from the log
    assert msgspec.json.encode(view(first)) == msgspec.json.encode(view(replayed))
    # Invariants: a GPU is held only by a job that holds GPUs, on that node.
    for node in first.nodes.values():
        for index, job_id in node.allocated.items():
            job = first.jobs[job_id]
            assert job.status.holds_gpus
            assert index in job.placements[node.node_id]
    for job in first.jobs.values():
        assert (job.job_id in first.pending) == (job.status == JobStatus.PENDING)
        assert (job.job_id in first.stopped) == (job.status == JobStatus.PREEMPTED)
    assert set(first.holds) <= set(first.pending)
    runtimes = [first.jobs[j].spec.max_runtime_ns for j in first.pending]
    assert first.waiting_runtimes == sorted(r for r in runtimes if r is not None)


@given(st.lists(events, max_size=30))
def test_redelivered_charges_change_nothing(sequence: list[Event]) -> None:
    once = fold(*sequence)
    twice = fold(*(x for e in sequence for x in ([e, e] if isinstance(e, UsageCharged) else [e])))
    assert msgspec.json.encode(ledger(once)) == msgspec.json.encode(ledger(twice))


def ledger(state: State) -> list[object]:
    return [
        sorted((a, u.total_gpu_ms, sorted(u.by_hour.items())) for a, u in state.usage.items()),
        sorted((a, sorted(b.used.items())) for a, b in state.budgets.items()),
        sorted(state.unbilled.items()),
    ]


@given(st.lists(events, max_size=30))
def test_planning_leaves_the_state_as_it_was(sequence: list[Event]) -> None:
    state = fold(*sequence)
    before = msgspec.json.encode(view(state))
    plan(state, now=1, policy=DEFAULT_POLICY)
    assert msgspec.json.encode(view(state)) == before


def view(state: State) -> dict[str, object]:
    """Everything a state holds, in a form that compares byte for byte."""
    return {
        "seq": state.seq,
        "jobs": [state.jobs[j] for j in sorted(state.jobs)],
        "nodes": [
            (n, sorted(node.allocated.items()), node) for n, node in sorted(state.nodes.items())
        ],
        "pending": list(state.pending),
        "idempotency": sorted(state.idempotency.items()),
        "ignored": state.ignored,
        "last_plan_seq": state.last_plan_seq,
        "ledger": ledger(state),
    }


def test_an_admission_voided_by_a_later_event_is_ignored() -> None:
    # The plan was computed before the cancellation, appended after it.
    state = fold(
        b.node("n1"),
        b.submitted("j1"),
        JobCancelRequested(meta=b.meta(), job_id="j1"),
        b.plan(("j1", "n1", [0]), basis_seq=2),
    )
    assert state.jobs["j1"].status == JobStatus.CANCELLED
    assert state.nodes["n1"].allocated == {}
    assert state.ignored[-1].reason == "j1: job is not pending"


def test_an_unreadable_plan_still_counts_as_the_last_plan() -> None:
    class UnreadablePlan:
        seq = 4
        type = "PlanComputed"
        event = None
        error = "from a newer schema"

    state = apply_record(fold(b.submitted("j1")), UnreadablePlan())
    assert state.last_plan_seq == 4


def test_reports_about_an_earlier_attempt_are_ignored() -> None:
    state = fold(
        b.node("n1", 2),
        b.submitted("j1", resumable=True),
        b.plan(("j1", "n1", [0])),
        b.started("j1", "n1", [0]),
        b.lost("n1"),  # requeued: attempt 1
        b.node("n1", 2),
        b.plan(("j1", "n1", [1])),
    )
    assert state.jobs["j1"].attempts == 1
    apply(state, 8, b.exited("j1", "n1", 0))  # a late report from attempt 0
    assert state.jobs["j1"].status == JobStatus.ADMITTED
    assert "attempt 0" in state.ignored[-1].reason
    apply(state, 9, msgspec.structs.replace(b.started("j1", "n1", [1]), attempt=1))
    assert state.jobs["j1"].status == JobStatus.RUNNING


def test_an_admitted_job_cancelled_before_it_started_frees_its_gpus() -> None:
    state = fold(
        b.node("n1"),
        b.submitted("j1"),
        b.plan(("j1", "n1", [0])),
        JobCancelRequested(meta=b.meta(), job_id="j1"),
    )
    assert state.jobs["j1"].status == JobStatus.ADMITTED
    apply(state, 5, JobCancelled(meta=b.meta(), job_id="j1", node_id="n1"))
    assert state.jobs["j1"].status == JobStatus.CANCELLED
    assert state.nodes["n1"].allocated == {}


def test_registering_again_does_not_clear_an_unhealthy_node() -> None:
    state = fold(
        b.node("n1"),
        NodeHealthChanged(meta=b.meta(), node_id="n1", healthy=False, reason="XID 79"),
        b.node("n1"),
    )
    assert not state.nodes["n1"].healthy
    assert not state.nodes["n1"].schedulable


# With the accounts' quotas and nodes changing too, and jobs that declare runtimes (so that
# reservations are made): what the plan memo keeps between cycles.
memo_events = st.one_of(
    events,
    st.builds(
        lambda j, g, m: b.submitted(j, g, max_runtime_ns=m * 60 * 10**9),
        st.sampled_from(JOBS),
        st.integers(1, 4),
        st.integers(1, 5),
    ),
    st.builds(
        lambda kind, path, quota: kind(
            meta=b.meta(), path=path, settings=AccountSettings(quota={"gpu": quota})
        ),
        st.sampled_from([AccountDefined, AccountUpdated]),
        st.sampled_from(["lab", "lab/team", "lab/other"]),
        st.integers(0, 4),
    ),
    st.builds(
        lambda n: NodeLost(meta=b.meta(), node_id=n, last_seen_ns=0, timeout_ns=1),
        st.sampled_from(NODES),
    ),
)


@settings(max_examples=300)
@given(
    st.lists(memo_events, max_size=30),
    st.lists(st.integers(0, 3 * 60 * 10**9), min_size=30, max_size=30),
    st.sampled_from([1, 3]),
)
def test_the_plan_memo_never_changes_a_plan(
    sequence: list[Event], clock: list[int], reservations: int
) -> None:
    from allot.core import PlanMemo

    policy = msgspec.structs.replace(DEFAULT_POLICY, reservations=reservations)
    state = State()
    memo = PlanMemo(state)
    now = 0
    for seq, (event, step) in enumerate(zip(sequence, clock, strict=False), start=1):
        apply(state, seq, event)
        now += step
        remembered = plan(state, now, policy, memo)
        assert remembered == plan(state, now, policy)


def test_what_jobs_hold_is_summed_per_account_path_ancestors_included() -> None:
    state = fold(
        b.node("n1", 4),
        b.submitted("a", 2, account="lab/a"),
        b.submitted("b", 1, account="lab/b"),
        b.plan(("a", "n1", [0, 1]), ("b", "n1", [2])),
    )
    assert {path: held["gpu"] for path, held in state.quota_used.items()} == {
        "lab/a": 2,
        "lab/b": 1,
        "lab": 3,
    }
    apply(state, state.seq + 1, b.exited("a", "n1"))
    assert {path: held["gpu"] for path, held in state.quota_used.items()} == {"lab/b": 1, "lab": 1}


def test_a_job_of_no_gpus_is_refused_by_the_fold_as_the_intake_refuses_it() -> None:
    # Appended around the intake, a job of zero GPUs was admitted with an empty placement,
    # and folding that plan failed in every service.
    state = fold(
        b.node("n1", 8),
        b.submitted("x", 0, account="lab/x", max_gpus=2),
        b.submitted("y", 1, account="lab/y"),
        b.plan(b.admission("x", ("n1", [])), ("y", "n1", [0])),
        b.started("x", "n1", []),
        b.started("y", "n1", [0]),
        b.exited("y", "n1"),
        b.exited("x", "n1"),
    )
    assert "x" not in state.jobs
    assert state.ignored[0].reason.startswith("malformed: gpus='0'")
    assert state.quota_used == {}
    assert state.jobs["y"].status == JobStatus.SUCCEEDED


def test_every_folded_event_type_says_what_planners_keep_that_it_changes() -> None:
    """A planner's memos key on the state's versions, which the fold bumps by one table:
    an event type with a rule and no entry there would leave them stale."""
    from allot.core import fold

    assert set(fold.CHANGES) == set(fold._RULES)
