"""Executes preemption: turns what ``allot.core.executor.due`` says into events.

Every event carries a message id made of the job, its attempt and the step (or the node and
its drain), so an event appended twice — after a redelivery, a retry, or a restart of this
service in the middle of a preemption — is stored once. What is due is recomputed from
the log each time, so a restarted preemptor finishes whatever its predecessor began.
"""

import argparse
import logging

from allot.bus.eventlog import EventLog
from allot.bus.tracing import JobTraces
from allot.core import State
from allot.core.executor import Action, Drained, Kill, Requeue, SettleLoss, Stop, due
from allot.proto import msgids
from allot.proto.events import (
    Event,
    GraceTooShort,
    JobPreempted,
    JobRequeued,
    KillRequested,
    NodeDrained,
    StopRequested,
)
from allot.services.runtime import Clock, event_span, follow_state, stamp

log = logging.getLogger("allot.preemptor")


class Preemptor:
    def __init__(self, events: EventLog, clock: Clock | None = None, tick_s: float = 1.0):
        self.events = events
        self.clock = clock or Clock()
        self.tick_s = tick_s
        self.state = State()
        self.traces = JobTraces()

    async def run(self) -> None:
        # Grace periods and runtimes end without any event: the tick looks again.
        await follow_state(
            self.events, self.state, self.act, self.tick_s, self.traces.note, snapshot=True
        )

    async def act(self) -> None:
        for action in due(self.state, self.clock.now()):
            for event, msg_id in self._events_for(action):
                with event_span("preemptor", self.state, self.traces, event):
                    await self.events.append(event, msg_id=msg_id)
            log.info("%s", action)

    def _events_for(self, action: Action) -> list[tuple[Event, str]]:
        meta = stamp("preemptor", self.clock)
        if isinstance(action, Stop):
            stop = StopRequested(
                meta=meta, job_id=action.job_id, grace_ns=action.grace_ns, reason=action.reason,
                kind=action.kind, attempt=action.attempt,
            )  # fmt: skip
            return [(stop, msgids.attempt_step(action.job_id, action.attempt, "stop"))]
        if isinstance(action, Kill):
            kill = KillRequested(
                meta=meta, job_id=action.job_id, reason="grace period over", attempt=action.attempt
            )
            return [(kill, msgids.attempt_step(action.job_id, action.attempt, "kill"))]
        if isinstance(action, Requeue):
            requeued = JobRequeued(meta=meta, job_id=action.job_id, reason="preempted")
            return [(requeued, msgids.attempt_step(action.job_id, action.attempt, "requeued"))]
        if isinstance(action, Drained):
            drained = NodeDrained(meta=meta, node_id=action.node_id)
            return [(drained, msgids.node_drained(action.node_id, action.drain))]
        return self._settling(action)

    def _settling(self, action: SettleLoss) -> list[tuple[Event, str]]:
        events: list[tuple[Event, str]] = []
        if action.grace_too_short_ns is not None:
            warning = GraceTooShort(
                meta=stamp("preemptor", self.clock), job_id=action.job_id,
                grace_ns=action.grace_ns, measured_ns=action.grace_too_short_ns,
            )  # fmt: skip
            events.append(
                (warning, msgids.attempt_step(action.job_id, action.attempt, "grace-too-short"))
            )
            log.warning("%s needed longer than its grace period to stop", action.job_id)
        preempted = JobPreempted(
            meta=stamp("preemptor", self.clock), job_id=action.job_id,
            lost_gpu_ms=action.lost_gpu_ms, checkpoint_age_ns=action.checkpoint_age_ns,
            grace_used_ns=action.grace_used_ns, attempt=action.attempt,
        )  # fmt: skip
        events.append((preempted, msgids.attempt_step(action.job_id, action.attempt, "preempted")))
        return events


async def serve(args: argparse.Namespace, events: EventLog) -> None:
    await Preemptor(events, tick_s=args.tick).run()
