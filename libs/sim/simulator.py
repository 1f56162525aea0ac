"""A discrete-event simulator that drives the very same core as the services: the fold
(``allot.core.apply``) and the planner (``allot.core.plan``), on a virtual clock.

Time jumps from one event to the next (arrivals, job ends, stops, the hourly accounting);
after the events of each moment the planner plans once, as the planner service does when
it has caught up with the log. What the services would append, the simulator appends to
its own state: admissions start at once, preemptions stop their victims, charges are made
every hour of virtual time and when a run ends, budgets are granted at the start (after
the nodes have registered, so that a share of the cluster has a size) and announced as used
up after the charges that used them up, as the ledger does. The model of a job:

- it runs ``duration_s`` of work; a resumable job that is stopped saves its progress on
  SIGTERM (the workload contract) and resumes later, paying ``restart_overhead_s`` again;
  a job that cannot resume loses its work and ends (Allot requeues only resumable jobs);
- a job no block of the cluster could ever hold is refused at arrival, as intake refuses
  it, and left out of the metrics (counted as ``refused``);
- stopping takes ``stop_s`` of virtual time (saving a checkpoint), at most its grace;
- when a node fails (a ``NodeOutage`` of the trace) its jobs are cut off without warning,
  as ``NodeLost`` says: a resumable job keeps the progress of its last checkpoint (one
  every ``checkpoint_interval_s`` of its run) and is requeued, paying the restart overhead
  again; a job that cannot resume loses its work and ends. The node takes work again
  once it is back.

Seeded and deterministic: no wall clock or unseeded randomness decides anything.
"""

import gc
import heapq
import itertools
import time
from collections.abc import Callable
from typing import Any

import msgspec

from allot.core import PlanMemo, Policy, State, apply, plan, policy_hash
from allot.core.accounts import ancestry
from allot.core.budgets import exhausted_now, read_grant
from allot.core.model import JobStatus
from allot.core.owed import global_shares
from allot.core.planning.cycle import Reservation
from allot.core.validate import validate_submission
from allot.proto.commands import BudgetGrantRequest, FieldError, SubmitRequest
from allot.proto.events import (
    DEFAULT_GRACE_NS,
    AccountDefined,
    AccountSettings,
    BudgetExhausted,
    BudgetGranted,
    Event,
    GpuInfo,
    JobExited,
    JobPreempted,
    JobRequeued,
    JobSpec,
    JobStarted,
    JobSubmitted,
    Meta,
    NodeLost,
    NodeRegistered,
    PolicyAdopted,
    StopRequested,
    UsageCharged,
)
from allot.sim.idle import IdleTally
from allot.sim.metrics import JobOutcome, compute, decisions_digest
from allot.sim.trace import NodeOutage, TraceJob, check_outages

S = 10**9
HOUR_NS = 3600 * S
FREEZE_EVERY = 1000  # moments


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    nodes: int
    gpus_per_node: int
    restart_overhead_s: float = 60.0
    stop_s: float = 10.0
    rack_size: int = 8


class _Run(msgspec.Struct, kw_only=True):
    """A job's progress, as the simulator knows it (the core knows nothing of it)."""

    trace: TraceJob
    done_s: float = 0.0  # work saved
    started_ns: int | None = None
    funded: bool = False  # its current run was admitted funded
    outcome: JobOutcome


class BudgetRefused(Exception):
    """A budget the ledger would refuse: ``errors`` says why, field by field, as
    ``read_grant`` does."""

    def __init__(self, account: str, errors: list[FieldError]):
        super().__init__(f"budget of {account} refused")
        self.account, self.errors = account, errors


class Simulator:
    def __init__(
        self,
        jobs: list[TraceJob],
        settings: Settings,
        policy: Policy,
        record: bool = False,
        outages: list[NodeOutage] | None = None,
        accounts: dict[str, AccountSettings] | None = None,
        budgets: list[BudgetGrantRequest] | None = None,
    ):
        """``budgets``: granted at the start, as ``allot budget grant`` would (raises
        ``BudgetRefused`` for one the ledger would refuse)."""
        self.settings, self.policy = settings, policy
        self.policy_hash = policy_hash(policy)
        self.state = State()
        # With ``record``, every event is kept: a log that replay can verify, showing the
        # simulator's decisions are the planner's own.
        self.events: list[Event] | None = [] if record else None
        self.memo = PlanMemo(self.state)
        self.now = 0
        self.idle = IdleTally()  # why GPUs sat idle while jobs waited
        self._reservations: list[Reservation] = []  # the last plan's
        self._ids = itertools.count()
        self._order = itertools.count()
        # (time, rank, order, kind, job id, attempt): an event of an attempt that is over is
        # void. A node fails after whatever else falls due at the same time (rank 1): a job
        # that ends, or saves its checkpoint, as its node fails has done so.
        self._queue: list[tuple[int, int, int, str, str, int]] = []
        self._arrivals = 0  # queued
        self._ups: dict[str, int] = {}  # node -> returns queued
        self.runs = {
            j.job_id: _Run(
                trace=j,
                outcome=JobOutcome(
                    job_id=j.job_id,
                    account=j.account,
                    tier=j.tier or "batch",
                    gpus=j.gpus * j.workers,
                    submit_s=j.submit_s,
                ),
            )
            for j in jobs
        }
        self._add(
            PolicyAdopted(
                meta=self._meta(), name=policy.name, policy_hash=self.policy_hash,
                policy_json=msgspec.json.encode(policy).decode(),
            )
        )  # fmt: skip
        self._accounts(accounts or equal_quotas(sorted({j.account for j in jobs}), settings))
        self.unfinished = len(jobs)
        self.refused: dict[str, str] = {}  # job id -> why intake would refuse it
        self._validated: dict[bytes, list[FieldError]] = {}  # encoded spec -> its refusals
        for job in jobs:
            self._at(int(job.submit_s * S), "arrive", job.job_id)
        for n in range(settings.nodes):
            self._on_up(node_name(n))
        for request in budgets or []:
            self._grant(request)
        check_outages(outages or [], settings.nodes)
        for outage in outages or []:
            self._at(int(outage.down_s * S), "down", node_name(outage.node))
            if outage.up_s is not None:
                self._at(int(outage.up_s * S), "up", node_name(outage.node))
        self._at(HOUR_NS, "account", "")

    def run(
        self, progress: Callable[[int, int], None] | None = None
    ) -> tuple[list[JobOutcome], float]:
        """Until every job has ended, or those left can never start: the outcomes (of the
        jobs intake would take) and the virtual end time (s).
        ``progress(ended, total)`` is called as every further 1% of the jobs ends."""
        total, told, moments = len(self.runs), 0, 0
        # Unfreezing lets go of all that is frozen: only where the run froze it all.
        freezes = gc.get_freeze_count() == 0
        try:
            while self._queue and self.unfinished:
                ended = total - self.unfinished
                if progress is not None and ended * 100 // total > told:
                    told = ended * 100 // total
                    progress(ended, total)
                self._advance()
                self._plan()
                self.idle.observe(self.state, self.now, self._reservations)
                if self._stuck():
                    break
                moments += 1
                if freezes and moments % FREEZE_EVERY == 0:
                    # The state only grows: keep the collector from scanning it again and
                    # again, as the planner service does with its own.
                    gc.collect()
                    gc.freeze()
        finally:
            if freezes:
                gc.unfreeze()  # so that what this run kept can go once it is dropped
        if progress is not None:
            progress(total - self.unfinished, total)
        outcomes = [r.outcome for job_id, r in self.runs.items() if job_id not in self.refused]
        return outcomes, self.now / S

    def _advance(self) -> None:
        """To the next moment something happens, and what happens then."""
        self.now = self._queue[0][0]
        while self._queue and self._queue[0][0] == self.now:
            _, _, _, kind, job_id, attempt = heapq.heappop(self._queue)
            self._count(kind, job_id, -1)
            record = self.state.jobs.get(job_id)
            if kind in ("finish", "stopped") and (record is None or record.attempts != attempt):
                continue
            getattr(self, f"_on_{kind}")(job_id)

    def _stuck(self) -> bool:
        """Nothing runs, no job is to arrive and no node that is down to come back: the
        jobs still waiting never start (the nodes they need failed for good, or a limit of
        their account holds them), since no plan could see anything new."""
        nodes = self.state.nodes
        return (
            not self.state.holders
            and not self._arrivals
            and not any(n and nodes[node].lost for node, n in self._ups.items())
        )

    def _count(self, kind: str, job_id: str, queued: int) -> None:
        """Keep count of the queued events that could let a waiting job start."""
        if kind == "arrive":
            self._arrivals += queued
        elif kind == "up":
            self._ups[job_id] = self._ups.get(job_id, 0) + queued

    def _accounts(self, tree: dict[str, AccountSettings]) -> None:
        for path in sorted(tree, key=lambda p: (p.count("/"), p)):  # parents first
            self._add(AccountDefined(meta=self._meta(), path=path, settings=tree[path]))

    def _grant(self, request: BudgetGrantRequest) -> None:
        """Append what the ledger appends for ``allot budget grant`` now."""
        grant, errors = read_grant(request, self.state)
        if grant is None:
            raise BudgetRefused(request.account, errors)
        gpu_ms, period_ns, share_ppm = grant
        self._add(
            BudgetGranted(
                meta=self._meta(), path=request.account, gpu_ms=gpu_ms, period_ns=period_ns,
                starts_at=self.now, share_ppm=share_ppm, by="sim",
            )
        )  # fmt: skip

    def budget_rates(self) -> dict[str, float]:
        """Each budget's GPU-seconds per hour, its grant spread evenly over its period."""
        return {
            path: budget.gpu_ms / 1000 * HOUR_NS / budget.period_ns
            for path, budget in sorted(self.state.budgets.items())
        }

    def shares(self) -> dict[str, float]:
        """Each account's share of the cluster, by the weights of the tree."""
        return {path: float(share) for path, share in global_shares(self.state).items()}

    # --- events of the virtual world ---

    def _on_arrive(self, job_id: str) -> None:
        job = self.runs[job_id].trace
        spec = JobSpec(
            account=job.account, gpus=job.gpus, workers=job.workers, command=["sim"],
            tier=job.tier or "batch",  # type: ignore[arg-type]
            resumable=bool(job.resumable), min_runtime_ns=int((job.min_runtime_s or 0) * S),
            max_runtime_ns=int(job.max_runtime_s * S) if job.max_runtime_s else None,
            checkpoint_interval_ns=int(job.checkpoint_interval_s * S)
            if job.resumable and job.checkpoint_interval_s else None,
            topology="any", grace_ns=DEFAULT_GRACE_NS,
        )  # fmt: skip
        errors = self._refusals(spec)
        if errors:  # refused, as intake refuses it: it could never run here
            self.refused[job_id] = "; ".join(f"{e.field}={e.value}: {e.message}" for e in errors)
            self.unfinished -= 1
            return
        self._add(JobSubmitted(meta=self._meta(), job_id=job_id, spec=spec))

    def _refusals(self, spec: JobSpec) -> list[FieldError]:
        """What intake would refuse the job for. Intake judges by the nodes registered, down
        or not, and the simulated nodes and accounts never change once it starts, so a
        spec gets the same answer every time it is asked."""
        key = msgspec.json.encode(spec)
        errors = self._validated.get(key)
        if errors is None:
            errors = validate_submission(SubmitRequest(spec=spec), self.state)
            self._validated[key] = errors
        return errors

    def _on_finish(self, job_id: str) -> None:
        record = self.state.jobs[job_id]
        run = self.runs[job_id]
        if record.status != JobStatus.RUNNING or record.stop is not None:
            return  # stopped meanwhile: this end belongs to a run that no longer is
        for node in record.placements:
            self._add(
                JobExited(
                    meta=self._meta(), job_id=job_id, node_id=node, exit_code=0,
                    output_path="-", attempt=record.attempts,
                )
            )  # fmt: skip
        self._charge(job_id)
        self._announce_used_up()
        self._ran(run)
        self._ended(run)

    def _on_stopped(self, job_id: str) -> None:
        record, run = self.state.jobs[job_id], self.runs[job_id]
        if record.status != JobStatus.RUNNING or record.stop is None:
            return  # its node failed while it stopped: that ended this attempt
        asked = record.stop.meta.at
        began = run.started_ns if run.started_ns is not None else asked
        worked = (asked - began) / S  # its progress when SIGTERM came
        stopped_in = int(self.settings.stop_s * S)
        for node in record.placements:
            self._add(
                JobExited(
                    meta=self._meta(), job_id=job_id, node_id=node, exit_code=0,
                    output_path="-", attempt=record.attempts, stopped_in_ns=stopped_in,
                )
            )  # fmt: skip
        self._charge(job_id)
        self._announce_used_up()
        self._ran(run)
        gpus = run.outcome.gpus
        if run.trace.resumable:
            lost = gpus * self._interrupted(run, worked, saved=worked)  # saved on SIGTERM
        else:
            run.done_s, lost = 0.0, gpus * worked
        run.outcome.preemptions += 1
        run.outcome.lost_gpu_s += lost
        self._add(
            JobPreempted(
                meta=self._meta(), job_id=job_id, lost_gpu_ms=int(lost * 1000),
                checkpoint_age_ns=0 if run.trace.resumable else None,
                grace_used_ns=int(self.settings.stop_s * S), attempt=record.attempts,
            )
        )  # fmt: skip
        if run.trace.resumable:
            self._add(JobRequeued(meta=self._meta(), job_id=job_id, reason="preempted"))
        else:
            self._ended(run)  # its work is lost; it ends

    def _on_down(self, node_id: str) -> None:
        """The node fails: its jobs lose what they did since their last checkpoint."""
        node = self.state.nodes[node_id]
        if node.lost:
            return
        cut_off = sorted(set(node.allocated.values()))
        for job_id in cut_off:
            self._charge(job_id)  # while the attempt is still the one that ran
        self._announce_used_up()
        self._add(NodeLost(meta=self._meta(), node_id=node_id, last_seen_ns=self.now, timeout_ns=0))
        for job_id in cut_off:
            run = self.runs[job_id]
            began = run.started_ns if run.started_ns is not None else self.now
            worked = (self.now - began) / S
            self._ran(run)
            interval = run.trace.checkpoint_interval_s
            if run.trace.resumable:
                saved = worked // interval * interval if interval else 0.0  # last checkpoint
                lost = self._interrupted(run, worked, saved)
            else:
                lost = worked
                self._ended(run)
            run.outcome.failures += 1
            run.outcome.failure_lost_gpu_s += run.outcome.gpus * lost

    def _on_up(self, node_id: str) -> None:
        """The node registers, at the start or back from a failure: it takes work again."""
        n, per_node = int(node_id[1:]), self.settings.gpus_per_node  # named by node_name(n)
        gpus = [GpuInfo(index=i, model="SIM", memory_mib=81920) for i in range(per_node)]
        self._add(
            NodeRegistered(
                meta=self._meta(), node_id=node_id, hostname=node_id, gpus=gpus,
                labels={"rack": f"r{n // self.settings.rack_size:03d}"},
                nvlink_islands=[list(range(per_node))],
            )
        )  # fmt: skip

    def _on_unprotected(self, _: str) -> None:
        """A funded run's minimum runtime is over. Nothing happens but the moment: the
        plan after it may stop the run now, as the live planner, planning every few
        seconds, would (without it, a job waiting for that could wait until something else
        happens, hours on)."""

    def _on_account(self, _: str) -> None:
        for job_id in sorted(self.state.holders):
            self._charge(job_id)
        self._announce_used_up()
        if self.unfinished:
            self._at(self.now + HOUR_NS, "account", "")

    # --- the planner's decisions, carried out ---

    def _plan(self) -> None:
        decided = plan(self.state, self.now, self.policy, self.memo)
        self._reservations = [decided.reservation] if decided.reservation else []
        self._reservations += decided.further
        if decided.empty:
            return
        self._add(
            decided.recorded(
                self._meta(), basis_seq=self.state.seq, now=self.now, policy=self.policy.name,
                policy_hash=self.policy_hash, code_version="sim",
            )
        )  # fmt: skip
        for admission in decided.admissions:
            job_id, run = admission.job_id, self.runs[admission.job_id]
            if self.state.jobs[job_id].status != JobStatus.ADMITTED:
                continue
            for placement in admission.placements:
                self._add(
                    JobStarted(
                        meta=self._meta(), job_id=job_id, node_id=placement.node_id,
                        gpus=placement.gpus, pid=0, output_path="-",
                        attempt=self.state.jobs[job_id].attempts,
                    )
                )  # fmt: skip
            run.started_ns = self.now
            run.funded = admission.funded
            if run.outcome.first_start_s is None:
                run.outcome.first_start_s = self.now / S
            left = run.trace.duration_s - run.done_s + self._overhead(run)
            self._at(self.now + max(1, int(left * S)), "finish", job_id)
            if run.funded and run.trace.min_runtime_s:
                self._at(self.now + int(run.trace.min_runtime_s * S), "unprotected", job_id)
        for preemption in decided.preemptions:
            record = self.state.jobs[preemption.job_id]
            if record.preemption != preemption or record.stop is not None:
                continue
            self._stop(record.job_id, preemption.code)

    def _stop(self, job_id: str, reason: str) -> None:
        """Ask the running job to stop (SIGTERM), as the preemptor does; it is gone once it
        has saved its work."""
        record = self.state.jobs[job_id]
        self._add(
            StopRequested(
                meta=self._meta(), job_id=job_id, grace_ns=record.spec.grace_ns,
                reason=reason, attempt=record.attempts,
            )
        )  # fmt: skip
        self._count_protected_stop(self.runs[job_id])
        stop = min(self.settings.stop_s * S, record.spec.grace_ns)
        self._at(self.now + int(stop), "stopped", job_id)

    def _count_protected_stop(self, run: _Run) -> None:
        """A stop asked of a funded run inside its minimum runtime breaks the promise
        funding made (R8, R13): counted by the simulator's own record of the plan it
        carried out, not the fold's, so that the count checks the planner."""
        began = run.started_ns if run.started_ns is not None else self.now
        if run.funded and self.now - began < int((run.trace.min_runtime_s or 0) * S):
            run.outcome.funded_stops_inside_min_runtime += 1

    # --- bookkeeping ---

    def _interrupted(self, run: _Run, worked: float, saved: float) -> float:
        """A resumable job's run ends after ``worked`` s, its progress saved as it was
        ``saved`` s into the run: it keeps that progress, less the restart overhead the
        run began with. The seconds it loses: the rest of the run, and the restart to come;
        less the part of this run's own overhead that was counted when it was last
        interrupted but never spent (the run ended first)."""
        overhead = self._overhead(run)
        run.done_s = min(run.done_s + max(0.0, saved - overhead), run.trace.duration_s)
        return worked - max(saved, overhead) + self.settings.restart_overhead_s

    def _overhead(self, run: _Run) -> float:
        """What starting its run costs: a restart's overhead after a preemption or failure."""
        restarted = run.outcome.preemptions or run.outcome.failures
        return self.settings.restart_overhead_s if restarted else 0.0

    def _ended(self, run: _Run) -> None:
        run.outcome.end_s = self.now / S
        self.unfinished -= 1

    def _ran(self, run: _Run) -> None:
        if run.started_ns is not None:
            ran = (run.started_ns / S, self.now / S)
            run.outcome.runs.append(ran)
            if run.funded:
                run.outcome.funded_runs.append(ran)
            run.started_ns, run.funded = None, False

    def _charge(self, job_id: str) -> None:
        record = self.state.jobs[job_id]
        unbilled = self.state.unbilled.get((job_id, record.attempts))
        if unbilled is None:
            return
        to = unbilled.until_ns if unbilled.until_ns is not None else self.now
        if to > unbilled.from_ns:
            self._add(
                UsageCharged(
                    meta=self._meta(), path=unbilled.account, job_id=job_id,
                    attempt=record.attempts, from_ns=unbilled.from_ns, to_ns=to,
                    gpu_ms=unbilled.gpus * (to - unbilled.from_ns) // 10**6,
                )
            )  # fmt: skip

    def _announce_used_up(self) -> None:
        """What the ledger appends after its charges: each budget they used up, once a
        period."""
        for path, period, used, budget in exhausted_now(self.state, self.now):
            self._add(
                BudgetExhausted(
                    meta=self._meta(), path=path, period=period, used_gpu_ms=used,
                    budget_gpu_ms=budget,
                )
            )  # fmt: skip

    def _meta(self) -> Meta:
        return Meta(id=f"s{next(self._ids)}", at=self.now, producer="sim")

    def _add(self, event: Event) -> None:
        apply(self.state, self.state.seq + 1, event)
        if self.events is not None:
            self.events.append(event)

    def _at(self, when: int, kind: str, job_id: str) -> None:
        record = self.state.jobs.get(job_id)
        attempt = record.attempts if record is not None else 0
        self._count(kind, job_id, 1)
        rank = 1 if kind == "down" else 0
        heapq.heappush(self._queue, (when, rank, next(self._order), kind, job_id, attempt))


def equal_quotas(leaves: list[str], settings: Settings) -> dict[str, AccountSettings]:
    """The tree of a trace without one: each of its accounts a leaf of equal weight, with an
    equal nominal quota of the cluster's GPUs and no borrowing limit (what only
    quota-minded policies look at)."""
    quota = settings.nodes * settings.gpus_per_node // max(1, len(leaves))
    paths = {a for leaf in leaves for a in ancestry(leaf)}
    return {p: AccountSettings(quota={"gpu": quota} if p in leaves else {}) for p in paths}


def down_spans(
    outages: list[NodeOutage], gpus_per_node: int, end_s: float
) -> list[tuple[float, float, int]]:
    """(from, until, GPUs) of each outage up to ``end_s``, as the metrics take them."""
    return [
        (o.down_s, min(end_s, o.up_s if o.up_s is not None else end_s), gpus_per_node)
        for o in outages
        if o.down_s < end_s
    ]


def node_name(index: int) -> str:
    return f"n{index:04d}"


def simulate(
    jobs: list[TraceJob],
    settings: Settings,
    policy: Policy,
    name: str,
    outages: list[NodeOutage] | None = None,
    accounts: dict[str, AccountSettings] | None = None,
    budgets: list[BudgetGrantRequest] | None = None,
) -> dict[str, Any]:
    """Run the trace under ``policy``; the metrics of ``allot.sim.metrics``."""
    return run_policy(
        jobs, settings, policy, name, outages=outages, accounts=accounts, budgets=budgets
    )[0]


def run_policy(
    jobs: list[TraceJob],
    settings: Settings,
    policy: Policy,
    name: str,
    progress: Callable[[int, int], None] | None = None,
    outages: list[NodeOutage] | None = None,
    accounts: dict[str, AccountSettings] | None = None,
    budgets: list[BudgetGrantRequest] | None = None,
) -> tuple[dict[str, Any], list[JobOutcome]]:
    """The metrics of a run, and what happened to each job (for plots). ``accounts``: the
    tree to run under (by default, ``equal_quotas``); ``budgets``: granted at the start."""
    started = time.perf_counter()
    simulator = Simulator(
        jobs, settings, policy, outages=outages, accounts=accounts, budgets=budgets
    )
    outcomes, end_s = simulator.run(progress)
    wall = time.perf_counter() - started
    down = down_spans(outages or [], settings.gpus_per_node, end_s)
    gpus = settings.nodes * settings.gpus_per_node
    result = compute(
        name, outcomes, gpus, end_s, simulator.shares(), wall_s=wall, down=down,
        budgets=simulator.budget_rates(),
    )  # fmt: skip
    result.update(simulator.idle.shares())
    result["refused"] = len(simulator.refused)
    result["decisions"] = decisions_digest(outcomes)
    return result, outcomes
