"""Each time the log has been read to its end, plan, and append the plan guarded by
``Nats-Expected-Last-Subject-Sequence`` on the plan subject: it fails only if another plan
was appended since the last one this planner folded (see docs/adr/0004). Events of other
kinds that arrive meanwhile do not void it: the plan names its ``basis_seq``, and the fold
ignores, with a reason, any admission they made impossible.

Every plan is folded by nearly every service, so in a burst of submissions a plan per catch-up
would cost them more than the submissions do. The planner therefore plans at most once per
``min_interval`` seconds: when it catches up sooner after its last plan, it waits for the
rest of the interval and plans on what the log holds by then, as ``sched_min_interval``
paces Slurm's scheduler. A quiet log is planned at once.

Plans also depend on time (aging, reservations, maximum-wait targets), so the planner plans
again every ``tick`` seconds while the log is quiet; a job past its account's maximum wait
gets one ``MaxWaitExceeded`` per attempt (its message id makes a repeat harmless)."""

import argparse
import asyncio
import gc
import logging
import math
import time
from typing import get_args

import msgspec

from allot.bus import tracing
from allot.bus.eventlog import Conflict, EventLog
from allot.bus.tracing import JobTraces
from allot.client.policyfile import policy_argument, setting_argument
from allot.core import DEFAULT_POLICY, PlanMemo, Policy, State, plan, policy_hash
from allot.core.maxwait import overdue
from allot.core.planning import Plan
from allot.core.policies import POLICIES
from allot.core.policytoml import with_settings
from allot.proto import msgids
from allot.proto.events import MaxWaitExceeded, PlanComputed, PolicyAdopted
from allot.services.runtime import (
    Clock,
    code_version,
    event_span,
    follow_state,
    seconds,
    spec_attributes,
    stamp,
)
from allot.services.snapshots import SnapshotWriter, start_from_snapshot
from allot.services.stats import CONFLICTS, CYCLES, Counts

log = logging.getLogger("allot.planner")
FREEZE_EVERY = 1000  # plans
# A snapshot every this many events folded, when caught up, at most once a minute: a
# restart then folds at most about this many, about 2 s of reading (docs/adr/0024).
SNAPSHOT_EVERY = 10_000
SNAPSHOT_INTERVAL_S = 60.0
MIN_INTERVAL_S = 0.02  # between two plans appended


class Planner:
    def __init__(
        self,
        events: EventLog,
        policy: Policy = DEFAULT_POLICY,
        clock: Clock | None = None,
        tick_s: float = 5.0,
        min_interval_s: float = MIN_INTERVAL_S,
        snapshot_every: int = SNAPSHOT_EVERY,
        snapshot_interval_s: float = SNAPSHOT_INTERVAL_S,
    ):
        self.events = events
        self.tick_s = tick_s
        self.min_interval_s = min_interval_s
        self._planned_at = -math.inf  # monotonic time of the last plan appended
        self.policy = policy
        self.policy_hash = policy_hash(policy)
        self.code_version = code_version()
        self.clock = clock or Clock()
        self.state = State()
        self.traces = JobTraces()
        self.counts = Counts("planner")  # cycles and conflicts, for the metrics
        self.plans = 0
        self.conflicts = 0
        self._own_plan_seq = 0  # the last plan this planner appended
        self._memo = PlanMemo(self.state)
        self._memo_refolds = 0  # the state's refolds the memo was built on
        self.snapshots = SnapshotWriter(
            events, self.code_version, snapshot_every, snapshot_interval_s
        )

    async def run(self) -> None:
        adopted = PolicyAdopted(
            meta=stamp("planner", self.clock),
            name=self.policy.name,
            policy_hash=self.policy_hash,
            policy_json=msgspec.json.encode(self.policy).decode(),
        )
        # Once per policy (within the stream's duplicate window; the fold keeps one anyway).
        await self.events.append(adopted, msg_id=msgids.policy_adoption(self.policy_hash))
        if await start_from_snapshot(self.events, self.state, self.code_version):
            self.snapshots.started_from(self.state)
        await asyncio.gather(
            follow_state(self.events, self.state, self.plan_once, self.tick_s, self.traces.note),
            self.counts.send_every(self.events.nc),
        )

    async def plan_once(self) -> None:
        if await self._paced():
            return  # more came meanwhile: planned once it is folded
        await self._plan()
        await self._report_overdue()
        self.snapshots.maybe_write(self.state)  # caught up, and the plan appended

    async def _paced(self) -> bool:
        """Wait out the rest of the interval since the last plan; whether the log grew
        meanwhile (its fold, which this wait held back, comes first: then a plan)."""
        wait = self._planned_at + self.min_interval_s - self.clock.monotonic()
        if wait <= 0:
            return False
        await asyncio.sleep(min(wait, self.min_interval_s))  # a clock set back waits no longer
        try:
            return await self.events.last_seq() > self.state.seq
        except Exception:  # the bus away: plan on what was folded
            return False

    async def _report_overdue(self) -> None:
        for late in overdue(self.state, self.clock.now()):
            event = MaxWaitExceeded(
                meta=stamp("planner", self.clock),
                job_id=late.job_id,
                account=late.account,
                attempt=late.attempt,
                waited_ns=late.waited_ns,
                max_wait_ns=late.max_wait_ns,
            )
            with event_span("planner", self.state, self.traces, event):
                await self.events.append(
                    event, msg_id=msgids.attempt_step(late.job_id, late.attempt, "max-wait")
                )
            log.warning(
                "%s waited past the %s target of %s", late.job_id, late.account, late.waited_ns
            )

    async def _plan(self) -> None:
        if self.state.seq < self._own_plan_seq:
            return  # a plan from before its predecessor was folded would repeat it
        if self._memo_refolds != self.state.refolds:  # a quarantine: it remembers another fold
            self._memo, self._memo_refolds = PlanMemo(self.state), self.state.refolds
        now, began, timer = self.clock.now(), time.time_ns(), time.perf_counter()
        decided = plan(self.state, now, self.policy, self._memo)
        self.counts.observe_cycle(time.perf_counter() - timer)
        self.counts.add(CYCLES, decided="false" if decided.empty else "true")
        if decided.empty:
            return
        event = decided.recorded(
            stamp("planner", self.clock),
            basis_seq=self.state.seq,
            now=now,
            policy=self.policy.name,
            policy_hash=self.policy_hash,
            code_version=self.code_version,
        )
        # A cycle that decided something is a trace of its own; the jobs' traces link to it.
        with tracing.tracer.start_as_current_span(
            "planner.cycle", start_time=began, attributes=cycle_attributes(decided, event)
        ) as cycle:
            try:
                appended = await self.events.append(
                    event, expected_last_subject_seq=self.state.last_plan_seq
                )
            except Conflict:
                self.conflicts += 1
                self.counts.add(CONFLICTS)
                cycle.set_attribute("allot.plan.conflict", True)
                log.info("another plan came first; %d conflicts so far", self.conflicts)
                return
            except Exception as error:  # too large, or the bus away: plan again on the next event
                log.error("plan on %d not stored: %s", self.state.seq, error)
                return
            cycle.set_attribute("allot.plan.seq", appended.seq)
            if cycle.is_recording():
                self._record_decisions(event, appended.seq, began)
        self._own_plan_seq = appended.seq
        self._planned_at = self.clock.monotonic()
        self.plans += 1
        if self.plans % FREEZE_EVERY == 1:
            # The folded state is long-lived: keep the collector from rescanning it on every
            # plan (a fifth of a 10k-job cycle otherwise). New objects are still collected.
            gc.collect()
            gc.freeze()
        log.info(
            "plan on %d: %d admitted, %d reasons changed (%d plans, %d conflicts)",
            self.state.seq,
            len(decided.admissions),
            len(decided.pending),
            self.plans,
            self.conflicts,
        )

    def _record_decisions(self, plan: PlanComputed, seq: int, began: int) -> None:
        """A span in each decided job's trace, for its part in the cycle: admitted, told
        why it waits, or chosen to stop."""
        ended = time.time_ns()
        decisions: list[tuple[str, str, tracing.Attributes]] = []
        own: tracing.Attributes
        for admitted in plan.admissions:
            nodes = ",".join(p.node_id for p in admitted.placements)
            own = {"allot.node": nodes, "allot.funded": admitted.funded}
            decisions.append((admitted.job_id, "planner.admitted", own))
        for waiting in plan.pending:
            decisions.append((waiting.job_id, "planner.waiting", {"allot.reason": waiting.code}))
        for chosen in plan.preemptions:
            own = {"allot.reason": chosen.code, "allot.for": str(chosen.params.get("for", ""))}
            decisions.append((chosen.job_id, "planner.chose_to_stop", own))
        for job_id, name, own in decisions:
            job = self.state.jobs.get(job_id)
            attributes = spec_attributes(job_id, job.spec if job is not None else None)
            attributes |= {**own, "allot.plan.seq": seq, "allot.basis_seq": plan.basis_seq}
            tracing.record_job_span(self.traces, job_id, name, began, ended, attributes)


def cycle_attributes(decided: Plan, event: PlanComputed) -> dict[str, str | int | bool]:
    """What an operator reads off a planning cycle."""
    return {
        "allot.basis_seq": event.basis_seq,
        "allot.plan.waiting": len(decided.waiting),
        "allot.plan.admitted": len(decided.admissions),
        "allot.plan.preempted": len(decided.preemptions),
        "allot.plan.reasons_changed": len(decided.pending),
        "allot.policy": event.policy,
    }


# The flags that set one field of the chosen policy (argparse dest -> the field's key in a
# policy file); a flag given wins over the policy's own value.
OVERRIDES = {
    "half_life": "fair_share.half_life",
    "usage_window": "fair_share.window",
    "aging_step": "aging_step",
    "aging_max": "aging_max_ranks",
    "backfill": "backfill",
    "order": "order",
}


def arguments() -> argparse.ArgumentParser:
    """The planner's command line; every policy value is checked as it is parsed, so a bad
    one stops the planner with a usage error (exit code 2) before it connects."""
    parser = argparse.ArgumentParser(prog="allot-planner")
    parser.add_argument(
        "--policy",
        type=policy_argument,
        default="allot",
        metavar="NAME|FILE",
        help=f"the policy to plan by: {', '.join(POLICIES)} (default allot), or a TOML file "
        "of the whole policy (examples/policy.toml); the flags below override its fields",
    )
    parser.add_argument(
        "--half-life",
        metavar="DURATION",
        type=setting_argument("fair_share.half_life"),
        help="fair-share usage half-life, e.g. 7d",
    )
    parser.add_argument(
        "--usage-window",
        metavar="DURATION",
        type=setting_argument("fair_share.window"),
        help='count usage in this sliding window instead of decaying it, e.g. 7d ("none": decay)',
    )
    parser.add_argument(
        "--aging-step",
        metavar="DURATION",
        type=setting_argument("aging_step"),
        help="waiting this long lifts a job one rank, e.g. 1h",
    )
    parser.add_argument(
        "--aging-max",
        metavar="N",
        type=setting_argument("aging_max_ranks"),
        help="the most ranks aging lifts a job",
    )
    parser.add_argument(
        "--backfill",
        action=argparse.BooleanOptionalAction,
        help="a reservation for the highest-ranked job that waits, and backfill around it",
    )
    parser.add_argument(
        "--order",
        choices=get_args(Policy.__annotations__["order"]),
        help="how the queue is ordered",
    )
    parser.add_argument(
        "--tick",
        type=seconds(0.01),
        default=5.0,
        help="seconds between plans while the log is quiet",
    )
    parser.add_argument(
        "--min-interval",
        type=seconds(0, 1),
        default=MIN_INTERVAL_S,
        help=f"seconds at least between two plans (default {MIN_INTERVAL_S:g}): in a burst, "
        "fewer plans for every service to fold",
    )
    parser.add_argument(
        "--snapshot-every",
        type=int,
        default=SNAPSHOT_EVERY,
        help=f"events folded between snapshots of the state (default {SNAPSHOT_EVERY}; 0: none)",
    )
    parser.add_argument(
        "--snapshot-interval",
        type=seconds(0),
        default=SNAPSHOT_INTERVAL_S,
        help=f"seconds at least between snapshots (default {SNAPSHOT_INTERVAL_S:g})",
    )
    return parser


def policy_from(args: argparse.Namespace) -> Policy:
    """The policy ``--policy`` chose, with the fields the flags set in place of its own
    (its name stays; its hash tells the two apart)."""
    given = {key: getattr(args, dest) for dest, key in OVERRIDES.items()}
    return with_settings(args.policy, {key: v for key, v in given.items() if v is not None})


async def serve(args: argparse.Namespace, events: EventLog) -> None:
    policy = policy_from(args)
    log.info("planning by the policy %s (%s)", policy.name, policy_hash(policy))
    planner = Planner(
        events,
        policy,
        tick_s=args.tick,
        min_interval_s=args.min_interval,
        snapshot_every=args.snapshot_every,
        snapshot_interval_s=args.snapshot_interval,
    )
    await planner.run()
