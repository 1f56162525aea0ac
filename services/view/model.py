"""The read model: the log folded once, and every reader's question answered from it.

Answers cost what they hold, not what the log holds: a job, a node or a trail is looked up;
a list of jobs is walked newest first until the page is full; the queue (the planner's
order, reasons and estimated starts, under the policy the planner recorded) is computed
once per change of the log, at most every ``refresh_s``, off the path of any query.

GPU-hours owed and delivered per account (``allot.core.owed``) need the log's records, not
the folded state: whoever holds the log computes them now and then (``owed_report``, off
the event loop) and hands them to the model (``ReadModel.owed``), which answers with the
latest; no query waits for them.
"""

import bisect
import heapq
import itertools
from collections.abc import Collection, Iterable, Iterator
from typing import Any

import msgspec

from allot.client import render
from allot.core import DEFAULT_POLICY, JobRecord, Policy, State
from allot.core.budgets import MS_PER_HOUR
from allot.core.drain import fates
from allot.core.fold import LogRecord
from allot.core.model import ArrayRecord, JobStatus, QueueEntry, queue_entry
from allot.core.owed import owed_and_delivered
from allot.core.replay import adopted_policy
from allot.core.trail import Step, Trails
from allot.proto.commands import FieldError
from allot.proto.events import PlanComputed
from allot.proto.queries import (
    AccountsQuery,
    Answer,
    ExplainQuery,
    JobQuery,
    JobsQuery,
    NodesQuery,
    QueueQuery,
)
from allot.services.runtime import Clock

# An answer stays below NATS's 1 MiB payload, whatever the jobs' specs hold.
MAX_ANSWER_BYTES = 768 << 10
SHOWN_IGNORED = 3  # of the events the fold refused, the latest


class Derived(msgspec.Struct, kw_only=True):
    """What is computed from the whole state once per change, for every query to share."""

    seq: int = -1  # the folded sequence it was computed at
    refolds: int = 0  # of the state it was computed from: a refold keeps the sequence
    computed_at: float = float("-inf")  # monotonic seconds
    policy: Policy = DEFAULT_POLICY
    policy_hash: str = ""
    rows: list[dict[str, Any]] = []  # the queue, in the planner's order
    by_job: dict[str, dict[str, Any]] = {}  # job id -> its row


class Owed(msgspec.Struct, frozen=True, kw_only=True):
    """GPU-hours owed and delivered per account over ``[start, end)``, from the log up to
    ``seq``."""

    seq: int
    start: int  # UTC ns
    end: int
    rows: list[dict[str, Any]]


def owed_report(records: Collection[LogRecord], end: int, window_ns: int) -> Owed:
    """What each account was owed and delivered in the window of ``window_ns`` before
    ``end``. It folds every record given: run it off the event loop."""
    start = end - window_ns
    rows = [
        {
            "account": r.account,
            "share": r.share_ppm / 1_000_000,
            "demand_gpu_hours": r.demand_gpu_ms / MS_PER_HOUR,
            "owed_gpu_hours": r.owed_gpu_ms / MS_PER_HOUR,
            "delivered_gpu_hours": r.delivered_gpu_ms / MS_PER_HOUR,
            "delivered_of_owed": r.ratio,
        }
        for r in owed_and_delivered(records, start, end)
    ]
    seq = max((record.seq for record in records), default=0)
    return Owed(seq=seq, start=start, end=end, rows=rows)


class ReadModel:
    def __init__(self, clock: Clock | None = None, refresh_s: float = 1.0):
        self.clock = clock or Clock()
        self.refresh_s = refresh_s
        self.state = State()
        self.trails = Trails()
        self.plan_policy = ""  # the hash of the policy the latest plan names
        self.derived = Derived()
        self.owed: Owed | None = None  # None: not computed yet

    # --- folding ----------------------------------------------------------------------

    def fold(self, state: State, record: LogRecord) -> None:
        """Fold one record (``state`` is ``self.state``), keeping every job's trail. A
        quarantine's refold keeps them as they are: ``trail()`` over the whole log keeps
        the steps taken before it too, so there is nothing to fold again."""
        self.trails.fold(state, record)
        if isinstance(record.event, PlanComputed):
            self.plan_policy = record.event.policy_hash

    def recorded_policy(self) -> tuple[Policy, str]:
        """The policy the latest plan was made under, and its hash; the default (hash "")
        before any plan, or when its settings are not in the log."""
        settings = self.state.policies.get(self.plan_policy)
        policy = adopted_policy(settings, self.plan_policy) if settings is not None else None
        return (policy, self.plan_policy) if policy is not None else (DEFAULT_POLICY, "")

    def refresh(self, force: bool = False) -> None:
        """Compute the queue again if the log moved, at most every ``refresh_s``."""
        derived, state = self.derived, self.state
        # One computed from a state a refold replaced (at the same sequence) says nothing.
        force = force or derived.refolds != state.refolds
        if derived.seq == state.seq and not force:
            return
        if not force and self.clock.monotonic() - derived.computed_at < self.refresh_s:
            return
        policy, hashed = self.recorded_policy()
        rows = render.queue_rows(state, self.clock.now(), policy)
        self.derived = Derived(
            seq=state.seq,
            refolds=state.refolds,
            computed_at=self.clock.monotonic(),
            policy=policy,
            policy_hash=hashed,
            rows=rows,
            by_job={row["job_id"]: row for row in rows},
        )

    def queue_at(self, at_least: int) -> Derived:
        """The queue, computed at ``at_least`` or later: now, if it was computed before
        that. A sequence past the folded log is no reason to plan the same state again."""
        self.refresh(force=self.derived.seq < min(at_least, self.state.seq))
        return self.derived

    # --- answers ----------------------------------------------------------------------

    def jobs(self, query: JobsQuery) -> Answer:
        states, users = set(query.states), set(query.users)
        found: list[JobRecord] = []
        size = 0
        more = False
        for job in self._newest_first(query):
            if states and str(job.status) not in states:
                continue
            if users and job.submitted_by not in users:
                continue
            if query.accounts and not any(_within(job.spec.account, a) for a in query.accounts):
                continue
            size += len(msgspec.json.encode(job))
            if len(found) == query.limit or size > MAX_ANSWER_BYTES:
                more = True
                break
            found.append(job)
        data = [render.job_view(job) for job in found]
        last = found[-1] if more and found else None
        state = self.state
        ignored = [f"{i.seq} {i.type}: {i.reason[:200]}" for i in state.ignored[-SHOWN_IGNORED:]]
        return Answer(seq=state.seq, data=data, more=more,
                      next_before=last.submitted_seq if last else None,
                      next_before_index=last.array_index if last else 0,
                      next_before_id=last.job_id if last else "",
                      ignored_count=state.ignored_count, ignored=ignored)  # fmt: skip

    def _newest_first(self, query: JobsQuery) -> Iterator[JobRecord]:
        """Jobs newest first, from ``query.before``; only the waiting ones where only they
        are asked for (they are indexed), so a page costs about its own length."""
        jobs = self.state.jobs
        before = None
        if query.before is not None:
            before = (query.before, query.before_index, query.before_id)
        candidates: Iterator[JobRecord]
        if query.array is not None:
            array = self.state.arrays.get(query.array)
            candidates = (jobs[i] for i in reversed(array.tasks if array else []))
        elif set(query.states) == {"pending"}:
            # Not ``state.pending``: a requeued job comes last there, out of submission
            # order. Each (tier, account)'s waiting jobs are kept in submission order:
            # merged from their ends, they come newest first, each where it was submitted.
            tails = [_backwards(entries, before) for entries in self.state.queues.values()]
            tails += [  # and the tasks that wait for their array's limit, outside the queues
                _held_backwards(self.state, array, before)
                for array in self.state.arrays.values()
                if array.released < len(array.tasks) and not array.cancel_requested
            ]
            return (jobs[job_id] for _, _, job_id in heapq.merge(*tails, reverse=True))
        else:
            candidates = _last_first(jobs[i] for i in reversed(jobs))
        if before is None:
            return candidates
        return itertools.dropwhile(lambda job: queue_entry(job) >= before, candidates)

    def job(self, query: JobQuery) -> Answer:
        array = self.state.arrays.get(query.job_id)
        if array is not None:
            return Answer(seq=self.state.seq, data={"array": render.array_view(self.state, array)})
        job = self.state.jobs.get(query.job_id)
        if job is None:
            return self._no_job(query.job_id)
        return Answer(seq=self.state.seq, data=render.job_view(job))

    def queue(self, query: QueueQuery) -> Answer:
        derived = self.queue_at(query.at_least)
        rows = derived.rows
        if query.accounts:
            rows = [r for r in rows if any(_within(r["account"], a) for a in query.accounts)]
        page = rows[query.offset : query.offset + query.limit]
        now = self.clock.now()
        shown, size = [], 0
        for row in page:  # rows of long ids, names and accounts: cut below the payload limit
            size += len(msgspec.json.encode(row))
            if size > MAX_ANSWER_BYTES:
                break
            shown.append({**row, "waiting_s": max(0, now - row["queued_at"]) // 10**9})
        data = {
            "policy": derived.policy.name,
            "policy_hash": derived.policy_hash or None,  # None: no plan recorded one yet
            "computed_at_seq": derived.seq,
            "rows": shown,
        }
        more = query.offset + len(shown) < len(rows)
        return Answer(seq=self.state.seq, data=data, more=more, total=len(rows))

    def explain(self, query: ExplainQuery) -> Answer:
        array = self.state.arrays.get(query.job_id)
        if array is not None:
            return self._explain_array(query, array)
        job = self.state.jobs.get(query.job_id)
        if job is None:
            return self._no_job(query.job_id)
        return Answer(seq=self.state.seq, data=self._explained(query, job))

    def _explain_array(self, query: ExplainQuery, array: ArrayRecord) -> Answer:
        """The array at a glance, and why the first of its tasks that waits does; held
        tasks wait for the array's limit, which their reason says."""
        jobs = self.state.jobs
        waiting = next((jobs[t] for t in array.tasks if jobs[t].status is JobStatus.PENDING), None)
        task = None if waiting is None else self._explained(query, waiting)
        data = {"array": render.array_view(self.state, array), "task": task}
        return Answer(seq=self.state.seq, data=data)

    def _explained(self, query: ExplainQuery, job: JobRecord) -> dict[str, Any]:
        derived = self.queue_at(query.at_least)
        row = derived.by_job.get(job.job_id)
        if job.job_id in self.state.pending and row is None:
            row = {"position": None, "reason_text": "admitted by the next plan",
                   "estimated_start": None}  # fmt: skip
        now = self.clock.now()
        view = render.explain(self.state, job, now, derived.policy, row)
        ended = job.ended_at if job.status.terminal else None
        steps = self.trails.of(job.job_id, job.array_id, ended)
        view["trail"] = [msgspec.to_builtins(step) for step in _shown(steps)]
        return view

    def nodes(self, query: NodesQuery) -> Answer:
        nodes = self.state.nodes
        if query.node_id is not None:
            node = nodes.get(query.node_id)
            if node is None:
                known = ", ".join(sorted(nodes)[:20]) or "none"
                return self._refused("node_id", query.node_id, f"no such node (nodes: {known})")
            view = render.node_view(node, self.state)
            # What a drain would do to each job there, gracefully and now: what `allot nodes
            # cordon --drain` says (and asks about) before it is sent.
            for mode, immediate in (("drain_fates", False), ("drain_now_fates", True)):
                view[mode] = msgspec.to_builtins(fates(self.state, node.node_id, immediate))
            return Answer(seq=self.state.seq, data=[view])
        ids = sorted(nodes)
        if query.after is not None:
            ids = ids[bisect.bisect_right(ids, query.after) :]
        data: list[dict[str, Any]] = []
        size = 0
        for node_id in ids:  # a node of many GPUs takes kilobytes: a page of them is cut
            view = render.node_view(nodes[node_id], self.state)
            size += len(msgspec.json.encode(view))
            if size > MAX_ANSWER_BYTES:
                break
            data.append(view)
        return Answer(seq=self.state.seq, data=data, more=len(data) < len(ids))

    def accounts(self, query: AccountsQuery) -> Answer:
        policy, _ = self.recorded_policy()
        tree = {path: msgspec.to_builtins(s) for path, s in sorted(self.state.accounts.items())}
        budget = render.budget_rows(
            self.state, self.clock.now(), query.window_ns, policy.fair_share
        )
        owed = None if self.owed is None else msgspec.to_builtins(self.owed)
        return Answer(seq=self.state.seq, data={"accounts": tree, "budget": budget, "owed": owed})

    def plan_seqs(self, job_id: str) -> list[int]:
        """The plans that decided something about the job, by their sequence (from its
        trail): what its trace needs of the log besides its own events."""
        decided = ("waiting", "admitted", "preempting", "held")
        return sorted({step.seq for step in self.trails.of(job_id) if step.what in decided})

    def _no_job(self, job_id: str) -> Answer:
        return self._refused("job_id", job_id, "no such job")

    def _refused(self, field: str, value: str, message: str) -> Answer:
        error = FieldError(field=field, value=value, message=message)
        return Answer(seq=self.state.seq, errors=[error])


def _shown(steps: list[Step]) -> list[Step]:
    """A trail as an answer holds it: a job that waited through many plans, each with
    other figures, has more steps than a message takes. Its first step and as many of the
    latest as fit are kept, with a step that says how many were left out between."""
    sizes = [len(msgspec.json.encode(step)) for step in steps]
    if sum(sizes) <= MAX_ANSWER_BYTES:
        return steps
    kept, size = len(steps), sizes[0]
    while kept > 2 and size + sizes[kept - 1] <= MAX_ANSWER_BYTES:
        kept -= 1
        size += sizes[kept]
    first_left_out = steps[1]
    gap = Step(at=first_left_out.at, seq=first_left_out.seq, what="omitted",
               text=f"{kept - 1} steps not shown: the first and the latest are")  # fmt: skip
    return [steps[0], gap, *steps[kept:]]


def _last_first(newest_first: Iterable[JobRecord]) -> Iterator[JobRecord]:
    """Jobs, given newest submission first, in the order of their queue entries (submission
    seq, index in its array, id), last first: those of one batch are sorted among
    themselves, since the log's order of them is no order anyone observed."""
    for _, submitted_together in itertools.groupby(newest_first, key=_submitted_seq):
        yield from sorted(submitted_together, key=queue_entry, reverse=True)


def _submitted_seq(job: JobRecord) -> int:
    return job.submitted_seq


def _backwards(entries: list[QueueEntry], before: QueueEntry | None) -> Iterator[QueueEntry]:
    """A queue's entries before ``before`` (submission seq, index in its array, id), last
    first."""
    end = len(entries) if before is None else bisect.bisect_left(entries, before)
    return (entries[n] for n in range(end - 1, -1, -1))


def _held_backwards(
    state: State, array: ArrayRecord, before: QueueEntry | None
) -> Iterator[QueueEntry]:
    """An array's tasks held for its limit, as queue entries before ``before``, last first."""
    jobs, tasks = state.jobs, array.tasks
    for n in range(len(tasks) - 1, array.released - 1, -1):
        job = jobs[tasks[n]]
        entry = queue_entry(job)
        if job.array_held and (before is None or entry < before):
            yield entry


def _within(account: str, ancestor: str) -> bool:
    """Whether ``account`` is ``ancestor`` or below it in the tree."""
    return account == ancestor or account.startswith(ancestor + "/")
