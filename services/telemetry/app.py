"""Liveness uses this process's monotonic clock; only the transition (``NodeLost``) enters
the log. A node that registers (again) starts with a full timeout."""

import argparse
import asyncio
import logging

from nats.aio.msg import Msg

from allot.bus.eventlog import EventLog
from allot.core import State, silent_nodes
from allot.proto.events import NodeLost
from allot.proto.subjects import HEARTBEATS
from allot.services.runtime import Clock, follow_state, stamp

log = logging.getLogger("allot.telemetry")


class Telemetry:
    def __init__(self, events: EventLog, node_timeout_s: float, clock: Clock | None = None):
        self.events = events
        self.timeout_s = node_timeout_s
        self.clock = clock or Clock()
        self.state = State()
        self._last_seen: dict[str, float] = {}  # node id -> monotonic time of last sign of life
        self._last_seen_ns: dict[str, int] = {}  # node id -> wall clock of the same
        self._registered_at: dict[str, int] = {}

    async def run(self) -> None:
        await self.events.nc.subscribe(HEARTBEATS, cb=self._on_heartbeat)
        await asyncio.gather(
            follow_state(self.events, self.state, self._note_registrations), self._watch()
        )

    async def _on_heartbeat(self, msg: Msg) -> None:
        node_id = msg.subject.rsplit(".", 1)[-1]
        self._last_seen[node_id] = self.clock.monotonic()
        self._last_seen_ns[node_id] = self.clock.now()

    async def _note_registrations(self) -> None:
        for node in self.state.nodes.values():
            if self._registered_at.get(node.node_id) != node.registered_at:
                self._registered_at[node.node_id] = node.registered_at
                self._last_seen[node.node_id] = self.clock.monotonic()

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(min(1.0, self.timeout_s / 4))
            now = self.clock.monotonic()
            for node_id in silent_nodes(self.state, self._last_seen, now, self.timeout_s):
                node = self.state.nodes[node_id]
                event = NodeLost(
                    meta=stamp("telemetry", self.clock),
                    node_id=node_id,
                    last_seen_ns=self._last_seen_ns.get(node_id, node.registered_at),
                    timeout_ns=int(self.timeout_s * 1e9),
                )
                # One loss per registration, however often this loop runs before the fold.
                await self.events.append(event, msg_id=f"lost:{node_id}:{node.registered_at}")
                log.warning(
                    "node %s silent for %.1fs: lost", node_id, now - self._last_seen[node_id]
                )


async def serve(args: argparse.Namespace, events: EventLog) -> None:
    await Telemetry(events, args.node_timeout).run()
