"""The read model against a fold of the whole log, on random well-formed logs: what it
answers (jobs page by page, each job's trail, the queue under the recorded policy, the
nodes) is what folding every record from the start says, at any point of the log."""

import random
from collections.abc import Callable
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from allot.bus.codec import encode
from allot.bus.eventlog import Record, make_record
from allot.client import render
from allot.core import DEFAULT_POLICY, JobRecord, JobStatus, Policy, State, policy_hash
from allot.core.drain import fates
from allot.core.fairshare import FairSharePolicy
from allot.core.fold import apply_record, refold
from allot.core.trail import trail
from allot.proto.events import (
    AccountDefined,
    AccountSettings,
    Admission,
    Event,
    EventQuarantined,
    Hold,
    JobCancelled,
    JobCancelRequested,
    JobCheckpointed,
    JobExited,
    JobPreempted,
    JobRejected,
    JobRequeued,
    JobStarted,
    MaxWaitExceeded,
    NodeCordoned,
    NodeDrained,
    NodeHealthChanged,
    NodeLost,
    NodeUncordoned,
    PendingReason,
    Placement,
    PlanComputed,
    PolicyAdopted,
    Preemption,
    StopRequested,
    UsageCharged,
)
from allot.proto.queries import (
    ExplainQuery,
    JobQuery,
    JobsQuery,
    NodesQuery,
    QueueQuery,
)
from allot.proto.subjects import subject_for
from allot.services.view.model import ReadModel
from tests import builders as b
from tests.unit.test_read_model import FixedClock

S = 10**9
NODES = ["n1", "n2", "n3"]
ACCOUNTS = ["lab/a", "lab/b", "lab/a/x", "other"]
ASKED_ACCOUNTS = ["lab", "lab/a", "other", "la"]  # "la" is no ancestor of "lab/a"
USERS = ["alice", "bob", ""]
STATES = [str(s) for s in JobStatus]
POLICIES = {
    policy_hash(p): p
    for p in (
        DEFAULT_POLICY,
        msgspec.structs.replace(DEFAULT_POLICY, name="fifo", order="fifo"),
        msgspec.structs.replace(DEFAULT_POLICY, name="by-tier", order="tier", backfill=False),
        msgspec.structs.replace(
            DEFAULT_POLICY,
            name="strict-windowed",
            strict=True,
            fair_share=FairSharePolicy(half_life_ns=3600 * S, window_ns=3600 * S),
        ),
    )
}
PAYLOAD = 1 << 20  # NATS's


def fold_all(records: list[Record]) -> State:
    """The reference: every record folded from the start, a quarantine refolded at once."""
    state = State()
    for record in records:
        apply_record(state, record, records)
    return state


class LogMaker:
    """A random log, event by event, each one the log could hold at that point: mostly
    what services write for the state so far, and some that the fold ignores."""

    def __init__(self, draw: Callable[[st.SearchStrategy[Any]], Any]):
        self.draw = draw
        self.records: list[Record] = []
        self.state = State()  # the log so far, folded

    def pick(self, options: list[Any]) -> Any:
        return self.draw(st.sampled_from(options))

    def some(self, options: list[Any]) -> list[Any]:
        return [o for o in options if self.draw(st.booleans())]

    @property
    def at(self) -> int:
        return (len(self.records) + 1) * S

    def meta(self) -> Any:
        return b.meta(at=self.at)

    def append(self, event: Event) -> None:
        self.add(make_record(len(self.records) + 1, subject_for(event), encode(event), {}))

    def add(self, record: Record) -> None:
        self.records.append(record)
        apply_record(self.state, record, self.records)

    def make(self, count: int) -> list[Record]:
        actions = [
            self.node,
            self.submit,
            self.submit,
            self.submit,
            self.plan,
            self.plan,
            self.plan,
            self.progress,
            self.progress,
            self.progress,
            self.progress,
            self.progress,
            self.start,
            self.start,
            self.start,
            self.exit,
            self.exit,
            self.cancel,
            self.stop,
            self.stop,
            self.preempted,
            self.preempted,
            self.requeued,
            self.requeued,
            self.checkpoint,
            self.max_wait,
            self.reject,
            self.node_event,
            self.adopt,
            self.account,
            self.charge,
            self.quarantine,
            self.unreadable,
        ]
        for _ in range(self.draw(st.integers(0, 3))):
            self.append(self.node())
        for _ in range(count):
            event = self.pick(actions)()
            if event is None:  # nothing to do it to: one more job instead
                event = self.submit()
            self.append(event)
        return self.records

    # --- the jobs -------------------------------------------------------------------

    def jobs_where(
        self, test: Callable[[JobRecord], bool], only: JobRecord | None = None
    ) -> list[JobRecord]:
        """The jobs that pass ``test``: any of them, or ``only`` that one."""
        jobs = self.state.jobs.values() if only is None else [only]
        return [job for job in jobs if test(job)]

    def progress(self) -> Event | None:
        """A job's next step: admitted, started, stopped, ended, requeued."""
        live = self.jobs_where(lambda j: not j.status.terminal)
        if not live:
            return None
        started = [j for j in live if j.status != JobStatus.PENDING]
        job = self.pick(started if started and self.draw(st.integers(0, 3)) else live)
        if job.status == JobStatus.PENDING:
            return self.plan(admit=[job])
        if job.status == JobStatus.PREEMPTED:
            return self.preempted(job) if job.preempted_at is None else self.requeued(job)
        if len(job.started_on) < len(job.placements):
            return self.start(job)
        if job.stop is not None:
            return self.exit(job)
        return self.pick([self.stop, self.exit])(job)

    def submit(self) -> Event:
        job_id = f"j{self.draw(st.integers(0, len(self.state.jobs) + 1))}"  # some repeat
        by = self.pick(USERS)
        return msgspec.structs.replace(
            b.submitted(
                job_id,
                self.pick([1, 1, 2, 3]),
                resumable=self.pick([True, True, True, False]),
                by=by,
                at=self.at,
                account=self.pick(ACCOUNTS),
                tier=self.pick(["interactive", "batch", "best-effort"]),
                workers=self.pick([1, 1, 1, 2]),
                name=self.pick(["", "train"]),
            )
        )

    def plan(self, admit: list[JobRecord] | None = None) -> Event:
        state = self.state
        free = {
            n.node_id: n.free_gpus() for n in state.nodes.values() if n.schedulable
        }  # what this plan has not given yet
        admissions = []
        pending = [state.jobs[j] for j in state.pending]
        for job in self.some(pending) if admit is None else admit:
            placements = []
            for node_id in sorted(free, key=lambda n: -len(free[n])):
                if len(placements) < job.spec.workers and len(free[node_id]) >= job.spec.gpus:
                    placements.append(
                        Placement(node_id=node_id, gpus=free[node_id][: job.spec.gpus])
                    )
            if len(placements) == job.spec.workers:
                for p in placements:
                    free[p.node_id] = free[p.node_id][len(p.gpus) :]
                admissions.append(
                    Admission(
                        job_id=job.job_id, placements=placements, funded=self.draw(st.booleans())
                    )
                )
        if self.draw(st.booleans()) and state.jobs:  # one the fold refuses
            job_id = self.pick(sorted(state.jobs))
            admissions.append(
                Admission(job_id=job_id, placements=[Placement(node_id="n9", gpus=[0])])
            )
        reasons = [
            PendingReason(
                job_id=job.job_id,
                code=self.pick(["NO_FIT", "QUOTA", "BEHIND"]),
                params=self.pick([{}, {"free": 1}, {"free": 2, "need": 3}]),
            )
            for job in self.some(pending)
        ]
        running = self.jobs_where(lambda j: j.status == JobStatus.RUNNING)
        preemptions = [
            Preemption(job_id=j.job_id, code=self.pick(["TIER", "FAIR_SHARE"]))
            for j in self.some(running)
        ]
        holds = []
        for job in self.some(pending):
            node = self.pick(sorted(state.nodes)) if state.nodes else "n1"
            gpus = self.pick([[], [0], [0, 1]])
            holds.append(
                Hold(
                    job_id=job.job_id,
                    placements=[Placement(node_id=node, gpus=gpus)] if gpus else [],
                )
            )
        hashed = self.pick([*POLICIES, "not-in-the-log"])
        policy = POLICIES.get(hashed, DEFAULT_POLICY)
        return PlanComputed(
            meta=self.meta(),
            basis_seq=state.seq,
            now=self.at,
            policy=policy.name,
            policy_hash=hashed,
            code_version="test",
            admissions=admissions,
            pending=reasons,
            preemptions=preemptions,
            holds=holds,
        )

    def start(self, only: JobRecord | None = None) -> Event | None:
        starts = [
            (job, node)
            for job in self.jobs_where(lambda j: j.status.holds_gpus, only)
            for node in job.placements
            if node not in job.started_on
        ]
        if not starts:
            return None
        job, node = self.pick(starts)
        return JobStarted(
            meta=self.meta(),
            job_id=job.job_id,
            node_id=node,
            gpus=job.placements[node],
            pid=7,
            output_path="/o",
            attempt=job.attempts,
        )

    def exit(self, only: JobRecord | None = None) -> Event | None:
        exits = [
            (job, node)
            for job in self.jobs_where(lambda j: j.status.holds_gpus, only)
            for node in job.placements
            if node not in job.exited_on
        ]
        if not exits:
            return None
        job, node = self.pick(exits)
        if job.status == JobStatus.ADMITTED and self.draw(st.booleans()):
            return JobCancelled(
                meta=self.meta(), job_id=job.job_id, node_id=node, attempt=job.attempts
            )
        stopped = S if job.stop is not None and not self.draw(st.booleans()) else None
        return JobExited(
            meta=self.meta(),
            job_id=job.job_id,
            node_id=node,
            output_path="/o",
            exit_code=self.pick([0, 0, 1, None]),
            attempt=job.attempts,
            stopped_in_ns=stopped,
        )

    def cancel(self) -> Event:
        job_id = self.pick([*sorted(self.state.jobs), "j-unknown"])
        return JobCancelRequested(meta=self.meta(), job_id=job_id, reason=self.pick(["", "no"]))

    def stop(self, only: JobRecord | None = None) -> Event | None:
        running = self.jobs_where(lambda j: j.status.holds_gpus and j.stop is None, only)
        if not running:
            return None
        job = self.pick(running)
        return StopRequested(
            meta=self.meta(),
            job_id=job.job_id,
            grace_ns=S,
            reason="for j0",
            kind=self.pick(["preempt", "preempt", "max_runtime"]),
            attempt=job.attempts,
        )

    def preempted(self, only: JobRecord | None = None) -> Event | None:
        stopped = self.jobs_where(
            lambda j: j.status == JobStatus.PREEMPTED and j.preempted_at is None, only
        )
        if not stopped:
            return None
        job = self.pick(stopped)
        return JobPreempted(
            meta=self.meta(),
            job_id=job.job_id,
            lost_gpu_ms=1500,
            checkpoint_age_ns=self.pick([None, S]),
            grace_used_ns=S,
            attempt=job.attempts,
        )

    def requeued(self, only: JobRecord | None = None) -> Event | None:
        stopped = self.jobs_where(
            lambda j: j.status == JobStatus.PREEMPTED and j.preempted_at is not None, only
        )
        if not stopped:
            return None
        return JobRequeued(meta=self.meta(), job_id=self.pick(stopped).job_id, reason="preempted")

    def checkpoint(self) -> Event | None:
        holding = self.jobs_where(lambda j: j.status.holds_gpus and bool(j.placements))
        if not holding:
            return None
        job = self.pick(holding)
        step = self.pick([None, job.checkpoint_step + 1, job.checkpoint_step])
        return JobCheckpointed(
            meta=self.meta(),
            job_id=job.job_id,
            node_id=next(iter(job.placements)),
            path="/c",
            step=step,
        )

    def max_wait(self) -> Event | None:
        if not self.state.pending:
            return None
        job = self.state.jobs[self.pick(list(self.state.pending))]
        return MaxWaitExceeded(
            meta=self.meta(),
            job_id=job.job_id,
            account=job.spec.account,
            attempt=job.attempts,
            waited_ns=9 * S,
            max_wait_ns=S,
        )

    def reject(self) -> Event | None:
        if not self.state.pending:
            return None
        return JobRejected(
            meta=self.meta(),
            job_id=self.pick(list(self.state.pending)),
            field="gpus",
            value="9",
            message="too many",
        )

    # --- nodes, policies, accounts, the operator -------------------------------------

    def node(self) -> Event:
        registered = b.node(self.pick(NODES), self.pick([1, 2, 4]), rack=self.pick([None, "r1"]))
        return msgspec.structs.replace(registered, meta=self.meta())

    def node_event(self) -> Event:
        node_id, m = self.pick([*NODES, "n-unknown"]), self.meta()
        return self.pick(
            [
                NodeLost(meta=m, node_id=node_id, last_seen_ns=0, timeout_ns=S),
                NodeCordoned(
                    meta=m,
                    node_id=node_id,
                    drain=self.draw(st.booleans()),
                    now=self.draw(st.booleans()),
                    reason="maintenance",
                    by="ops",
                ),
                NodeUncordoned(meta=m, node_id=node_id, by="ops"),
                NodeDrained(meta=m, node_id=node_id),
                NodeHealthChanged(
                    meta=m,
                    node_id=node_id,
                    healthy=self.draw(st.booleans()),
                    reason="xid",
                    gpu=self.pick([None, 0, 1]),
                    fault=self.pick([None, "xid"]),
                ),
            ]
        )

    def adopt(self) -> Event:
        hashed = self.pick(list(POLICIES))
        policy = POLICIES[hashed]
        return PolicyAdopted(
            meta=self.meta(),
            name=policy.name,
            policy_hash=hashed,
            policy_json=msgspec.json.encode(policy).decode(),
        )

    def account(self) -> Event:
        settings = AccountSettings(weight=self.pick([1, 2, 5]), quota=self.pick([{}, {"gpu": 2}]))
        return AccountDefined(
            meta=self.meta(), path=self.pick(["lab", "lab/a", "lab/b", "other"]), settings=settings
        )

    def charge(self) -> Event:
        job_id = self.pick([*sorted(self.state.jobs), "j-unknown"])
        return UsageCharged(
            meta=self.meta(),
            path=self.pick(ACCOUNTS),
            job_id=job_id,
            attempt=0,
            from_ns=0,
            to_ns=self.at,
            gpu_ms=self.pick([1000, 3_600_000]),
        )

    def quarantine(self) -> Event | None:
        if not self.records or self.draw(st.integers(0, 3)):  # rare: each one costs a refold
            return None
        return EventQuarantined(
            meta=self.meta(),
            seq=self.draw(st.integers(1, len(self.records))),
            reason="bad",
            by="ops",
        )

    def unreadable(self) -> Event:
        subject = self.pick(["allot.evt.plan.PlanComputed", "allot.evt.job.j0.JobSubmitted"])
        self.add(make_record(len(self.records) + 1, subject, b'{"type":', {}))
        return self.cancel()


# --- the comparison ---------------------------------------------------------------------


def recorded_policy(records: list[Record], state: State) -> tuple[Policy, str | None]:
    """The policy the latest plan names, found without the read model: the hash of the
    last record that is a plan, if a policy of that hash was adopted and stays folded."""
    plans = [r.event for r in records if isinstance(r.event, PlanComputed)]
    if not plans:
        return DEFAULT_POLICY, None
    hashed = plans[-1].policy_hash
    adopted = [
        r
        for r in records
        if isinstance(r.event, PolicyAdopted)
        and r.event.policy_hash == hashed
        and r.seq not in state.quarantined
    ]
    return (POLICIES[hashed], hashed) if adopted else (DEFAULT_POLICY, None)


def follow(model: ReadModel, records: list[Record], start: int) -> None:
    """Fold ``records[start:]`` as the view's service does: a record at a time, the log
    folded again after a quarantine (``allot.services.runtime.follow_state``)."""
    for n in range(start, len(records)):
        model.fold(model.state, records[n])
        if model.state.refold_due:
            model.state.become(refold(model.state, records[: n + 1]))


def assert_the_same(model: ReadModel, records: list[Record], rng: random.Random) -> None:
    """Every answer of ``model`` (folded up to ``records[-1]``) against the reference."""
    reference = fold_all(records)
    now = model.clock.now()
    seq = reference.seq
    answers = []

    # (a) jobs, page by page, whatever the filters
    newest_first = sorted(reference.jobs.values(), key=lambda j: j.submitted_seq, reverse=True)
    for _ in range(4):
        states = rng.choice([[], ["pending"], ["pending"], rng.sample(STATES, 2)])
        users = rng.choice([[], [rng.choice(USERS[:2])]])
        accounts = rng.choice([[], [rng.choice(ASKED_ACCOUNTS)]])
        before = rng.choice([None, None, rng.randint(1, seq + 1)])
        expected = [
            render.job_view(j)
            for j in newest_first
            if (not states or str(j.status) in states)
            and (not users or j.submitted_by in users)
            and (
                not accounts
                or any(j.spec.account == a or j.spec.account.startswith(a + "/") for a in accounts)
            )
            and (before is None or j.submitted_seq < before)
        ]
        listed: list[dict[str, Any]] = []
        limit = rng.randint(1, 4)
        for _page in range(len(expected) + 2):
            query = JobsQuery(
                states=states,
                users=users,
                accounts=accounts,
                limit=limit,
                before=before,
                at_least=seq,
            )
            answer = model.jobs(query)
            answers.append(answer)
            assert answer.seq == seq
            listed += answer.data
            if not answer.more:
                break
            before = answer.next_before
        assert [j["job_id"] for j in listed] == [j["job_id"] for j in expected], query
        assert listed == expected

    # (b) each job, and its trail
    policy, hashed = recorded_policy(records, reference)
    rows = render.queue_rows(reference, now, policy)
    by_job = {row["job_id"]: row for row in rows}
    for job_id, job in reference.jobs.items():
        answer = model.job(JobQuery(job_id=job_id, at_least=seq))
        assert answer.data == render.job_view(job)
        explained = model.explain(ExplainQuery(job_id=job_id, at_least=seq))
        answers += [answer, explained]
        view = dict(explained.data)
        assert view.pop("trail") == msgspec.to_builtins(trail(records, job_id)), job_id
        assert view == render.explain(reference, job, now, policy, by_job.get(job_id)), job_id
    assert model.explain(ExplainQuery(job_id="j-unknown")).errors

    # (c) the queue, under the policy the latest plan names
    for accounts in ([], [rng.choice(ASKED_ACCOUNTS)]):
        expected = [
            r
            for r in rows
            if not accounts
            or any(r["account"] == a or r["account"].startswith(a + "/") for a in accounts)
        ]
        shown: list[dict[str, Any]] = []
        limit, offset = rng.randint(1, 4), 0
        while True:
            answer = model.queue(
                QueueQuery(accounts=accounts, limit=limit, offset=offset, at_least=seq)
            )
            answers.append(answer)
            data = answer.data
            assert (data["policy"], data["policy_hash"]) == (policy.name, hashed)
            assert data["computed_at_seq"] == seq
            assert answer.total == len(expected)
            shown += data["rows"]
            offset += limit
            if not answer.more:
                break
        assert shown == expected

    # (d) the nodes
    nodes = model.nodes(NodesQuery(at_least=seq))
    answers.append(nodes)
    assert nodes.data == [
        render.node_view(n, reference) for _, n in sorted(reference.nodes.items())
    ]
    for node_id, node in reference.nodes.items():
        alone = render.node_view(node, reference) | {
            "drain_fates": msgspec.to_builtins(fates(reference, node_id, immediate=False)),
            "drain_now_fates": msgspec.to_builtins(fates(reference, node_id, immediate=True)),
        }
        assert model.nodes(NodesQuery(node_id=node_id)).data == [alone]

    # (e) every answer fits in a message
    assert all(len(msgspec.json.encode(a)) < PAYLOAD for a in answers)


def check_logs(data: st.DataObject, events: int) -> None:
    records = LogMaker(data.draw).make(data.draw(st.integers(events // 4, events), label="events"))
    rng = random.Random(data.draw(st.integers(0, 2**32), label="seed"))
    model = ReadModel(FixedClock(len(records) * S + 5 * S), refresh_s=60.0)
    # Compared at a moment of the log, then at its end: what was computed before (the
    # queue) must not leak into a later answer.
    middle = data.draw(st.integers(1, len(records)), label="middle")
    follow(model, records[:middle], 0)
    assert_the_same(model, records[:middle], rng)
    follow(model, records, middle)
    assert_the_same(model, records, rng)


# Shrinking a failing log takes many folds: it is bounded, and the explain phase skipped,
# so that a divergence is reported (with its smallest log) before the test times out.
PHASES = (Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink)


@given(st.data())
@settings(
    max_examples=40, deadline=None, phases=PHASES, suppress_health_check=[HealthCheck.too_slow]
)
def test_the_read_model_answers_as_the_whole_log_folded(data: st.DataObject) -> None:
    check_logs(data, 40)


@pytest.mark.slow
@pytest.mark.timeout(900)
@given(st.data())
@settings(
    max_examples=600, deadline=None, phases=PHASES, suppress_health_check=[HealthCheck.too_slow]
)
@pytest.mark.slow
def test_the_read_model_answers_as_the_whole_log_folded_long(data: st.DataObject) -> None:
    check_logs(data, 120)
