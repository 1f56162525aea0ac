"""Each time the log has been read to its end, plan; append the plan only if the log has
not moved meanwhile (``Nats-Expected-Last-Sequence`` = ``basis_seq``). On a conflict the
new events arrive, are folded, and the planner plans again from the longer prefix."""

import argparse
import logging
from importlib.metadata import version

from allot.bus.eventlog import Conflict, EventLog
from allot.core import POLICY_FIRST_FIT, Policy, State, plan, policy_hash
from allot.proto.events import PlanComputed
from allot.services.runtime import Clock, follow_state, stamp

log = logging.getLogger("allot.planner")


class Planner:
    def __init__(
        self, events: EventLog, policy: Policy = POLICY_FIRST_FIT, clock: Clock | None = None
    ):
        self.events = events
        self.policy = policy
        self.policy_hash = policy_hash(policy)
        self.code_version = version("allot")
        self.clock = clock or Clock()
        self.state = State()
        self.plans = 0
        self.conflicts = 0

    async def run(self) -> None:
        await follow_state(self.events, self.state, self.plan_once)

    async def plan_once(self) -> None:
        now = self.clock.now()
        decided = plan(self.state, now, self.policy)
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
        )
        try:
            await self.events.append(event, expected_last_seq=self.state.seq)
        except Conflict:
            self.conflicts += 1
            log.debug("plan on %d outdated; %d conflicts so far", self.state.seq, self.conflicts)
            return
        self.plans += 1
        log.info(
            "plan on %d: %d admitted, %d reasons changed, %d waiting (%d plans, %d conflicts)",
            self.state.seq,
            len(decided.admissions),
            len(decided.pending),
            len(self.state.pending) - len(decided.admissions),
            self.plans,
            self.conflicts,
        )


async def serve(args: argparse.Namespace, events: EventLog) -> None:
    await Planner(events).run()
