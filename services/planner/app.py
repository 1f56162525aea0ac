"""Each time the log has been read to its end, plan, and append the plan guarded by
``Nats-Expected-Last-Subject-Sequence`` on the plan subject: it fails only if another plan
was appended since the last one this planner folded (see docs/adr/0004). Events of other
kinds that arrive meanwhile do not void it: the plan names its ``basis_seq``, and the fold
ignores, with a reason, any admission they made impossible."""

import argparse
import logging

from allot.bus.eventlog import Conflict, EventLog
from allot.core import DEFAULT_POLICY, Policy, State, plan, policy_hash
from allot.core.accounts import parse_duration
from allot.core.fairshare import FairSharePolicy, StandingsMemo
from allot.proto.events import PlanComputed
from allot.services.runtime import Clock, code_version, follow_state, stamp

log = logging.getLogger("allot.planner")


class Planner:
    def __init__(
        self, events: EventLog, policy: Policy = DEFAULT_POLICY, clock: Clock | None = None
    ):
        self.events = events
        self.policy = policy
        self.policy_hash = policy_hash(policy)
        self.code_version = code_version()
        self.clock = clock or Clock()
        self.state = State()
        self.plans = 0
        self.conflicts = 0
        self._own_plan_seq = 0  # the last plan this planner appended
        self._memo = StandingsMemo()

    async def run(self) -> None:
        await follow_state(self.events, self.state, self.plan_once)

    async def plan_once(self) -> None:
        if self.state.seq < self._own_plan_seq:
            return  # a plan from before its predecessor was folded would repeat it
        now = self.clock.now()
        decided = plan(self.state, now, self.policy, self._memo)
        if decided.empty:
            return
        event = PlanComputed(
            meta=stamp("planner", self.clock),
            basis_seq=self.state.seq,
            now=now,
            policy=self.policy.name,
            policy_hash=self.policy_hash,
            code_version=self.code_version,
            admissions=decided.admissions,
            pending=decided.pending,
            ranks=decided.ranks,
        )
        try:
            appended = await self.events.append(
                event, expected_last_subject_seq=self.state.last_plan_seq
            )
        except Conflict:
            self.conflicts += 1
            log.info("another plan came first; %d conflicts so far", self.conflicts)
            return
        self._own_plan_seq = appended.seq
        self.plans += 1
        log.info(
            "plan on %d: %d admitted, %d reasons changed (%d plans, %d conflicts)",
            self.state.seq,
            len(decided.admissions),
            len(decided.pending),
            self.plans,
            self.conflicts,
        )


def policy_from(args: argparse.Namespace) -> Policy:
    """The planning policy the command line asks for; bad values stop the planner at once."""
    window = parse_duration(args.usage_window) if args.usage_window else None
    return Policy(
        fair_share=FairSharePolicy(half_life_ns=parse_duration(args.half_life), window_ns=window),
        aging_step_ns=parse_duration(args.aging_step),
        aging_max_ranks=args.aging_max,
    )


async def serve(args: argparse.Namespace, events: EventLog) -> None:
    await Planner(events, policy_from(args)).run()
