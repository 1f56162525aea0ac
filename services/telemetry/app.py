"""Node liveness and health. Only transitions enter the log.

Liveness uses this process's monotonic clock (``NodeLost``). A node that registers (again)
starts with a full timeout, and so does every node when this process is back on the bus or
from a stall of its own, or when most of the cluster is heard again after falling silent
together (``allot.core.liveness``, docs/adr/0012).

Health: each heartbeat carries the faults its node's GPUs show; ``allot.core.gpuhealth``
says which transitions they call for (``NodeHealthChanged`` per GPU, and ``NodeCordoned``
with a drain where the host is suspect), docs/adr/0017. Each is appended under a message
id derived from the node's record, so a heartbeat judged twice, or by two telemetry
services, records it once.
"""

import argparse
import asyncio
import logging

import msgspec
from nats.aio.msg import Msg

from allot.bus.eventlog import EventLog
from allot.core import Hearing, Silence, State, gpuhealth, judge_silence
from allot.proto import msgids
from allot.proto.events import (
    EVENT_BY_TAG,
    Event,
    EventQuarantined,
    NodeCordoned,
    NodeEvent,
    NodeHealthChanged,
    NodeLost,
)
from allot.proto.subjects import HEARTBEATS
from allot.proto.telemetry import GpuFault, decode_heartbeat
from allot.services.runtime import Clock, follow_state, stamp
from allot.services.stats import HEARTBEATS_REFUSED, Counts

log = logging.getLogger("allot.telemetry")
HEALTH_EVERY_S = 1.0
# What its decisions read: the nodes, and the quarantines that take a node's event back.
# Submissions and plans, nearly all of a busy log, are passed over undecoded.
READS = frozenset(
    tag for tag, kind in EVENT_BY_TAG.items() if issubclass(kind, NodeEvent | EventQuarantined)
)


class Telemetry:
    def __init__(
        self,
        events: EventLog,
        node_timeout_s: float,
        clock: Clock | None = None,
        recover_s: float = gpuhealth.RECOVER_NS / 1e9,
    ):
        self.events = events
        self.timeout_s = node_timeout_s
        self.recover_ns = int(recover_s * 1e9)
        self.clock = clock or Clock()
        self.state = State()
        self.counts = Counts("telemetry")
        self._last_seen: dict[str, float] = {}  # node id -> monotonic time of last sign of life
        self._last_seen_ns: dict[str, int] = {}  # node id -> wall clock of the same
        self._registered_at: dict[str, int] = {}
        self._hearing = listening(self.clock.monotonic())
        self._reconnects = events.nc.stats["reconnects"]
        self._held: tuple[str, ...] = ()
        self._faults: dict[str, list[GpuFault]] = {}  # node id -> what its last heartbeat said
        self._clear_since: dict[str, dict[int | None, int]] = {}

    async def run(self) -> None:
        await self.events.nc.subscribe(HEARTBEATS, cb=self._on_heartbeat)
        await asyncio.gather(
            follow_state(
                self.events, self.state, self._note_registrations, snapshot=True, reads=READS
            ),
            self._watch(),
            self._judge_health(),
            self.counts.send_every(self.events.nc),
        )

    async def _on_heartbeat(self, msg: Msg) -> None:
        node_id = msg.subject.rsplit(".", 1)[-1]
        self._last_seen[node_id] = self.clock.monotonic()
        self._last_seen_ns[node_id] = self.clock.now()
        # The subject is the proof of the sender (only that node may publish on it); a body
        # that cannot be read is still a sign of life, but says nothing of health.
        try:
            beat = decode_heartbeat(msg.data)
        except (msgspec.DecodeError, msgspec.ValidationError) as error:
            self.counts.add(HEARTBEATS_REFUSED)
            log.debug("heartbeat of %s not read: %s", node_id, error)
            return
        if beat.node_id != node_id:
            self.counts.add(HEARTBEATS_REFUSED)
            return
        if node_id in self.state.nodes:  # else its registration is still to be read
            self._faults[node_id] = beat.faults

    async def _judge_health(self) -> None:
        while True:
            await asyncio.sleep(HEALTH_EVERY_S)
            reports, self._faults = self._faults, {}
            for node_id, faults in sorted(reports.items()):
                try:
                    await self._judge(node_id, faults)
                except Exception as error:  # the next heartbeat is judged again
                    log.warning("recording the health of %s failed (%r)", node_id, error)

    async def _judge(self, node_id: str, faults: list[GpuFault]) -> None:
        node = self.state.nodes.get(node_id)
        if node is None or node.lost:
            return
        judgment = gpuhealth.judge(
            node,
            faults,
            now=self.clock.now(),
            clear_since=self._clear_since.get(node_id, {}),
            recover_ns=self.recover_ns,
        )
        self._clear_since[node_id] = judgment.clear_since
        # The ids name the record judged: read once, as a second telemetry service would.
        basis, drains = node.health_changes, node.drains
        event: Event
        for change in judgment.changes:
            event = NodeHealthChanged(
                meta=stamp("telemetry", self.clock),
                node_id=node_id,
                healthy=change.healthy,
                reason=change.reason,
                gpu=change.gpu,
                fault=change.fault,  # type: ignore[arg-type]
            )
            msg_id = msgids.health_change(node_id, change.gpu, change.healthy, basis)
            await self.events.append(event, msg_id=msg_id)
            log.warning("node %s, %s: %s", node_id, _device(change.gpu), change.reason)
        if judgment.cordon is not None:
            event = NodeCordoned(
                meta=stamp("telemetry", self.clock),
                node_id=node_id,
                drain=True,
                reason=judgment.cordon,
                by="telemetry",
                now=gpuhealth.SUSPECT_DRAIN_NOW,
            )
            await self.events.append(event, msg_id=msgids.suspect_drain(node_id, drains))
            log.warning("node %s is suspect (%s): cordoned, draining", node_id, judgment.cordon)

    async def _note_registrations(self) -> None:
        for node in self.state.nodes.values():
            if self._registered_at.get(node.node_id) != node.registered_at:
                self._registered_at[node.node_id] = node.registered_at
                self._last_seen[node.node_id] = self.clock.monotonic()

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(min(1.0, self.timeout_s / 4))
            now = self.clock.monotonic()
            self._note_connection(now)
            silence = judge_silence(
                self.state, self._last_seen, self._hearing, now=now, timeout=self.timeout_s
            )
            if silence.stalled:
                log.warning(
                    "this process looked at no node for %.1fs (stalled): it heard nobody "
                    "meanwhile, so every node has %.1fs from now",
                    silence.stalled,
                    self.timeout_s,
                )
            self._say_if_holding(silence)
            self._hearing = silence.hearing
            for node_id in silence.lost:
                # nats-py keeps what is published while it is away and sends it on its
                # return: a loss decided in the dark would be stored once the bus is back.
                if not self.events.nc.is_connected:
                    break
                try:
                    await self._declare_lost(node_id, now)
                except Exception as error:  # still silent at the next look: declared then
                    log.warning("declaring node %s lost failed (%r); next look", node_id, error)

    def _note_connection(self, now: float) -> None:
        """Off the bus, silence is no evidence; back on it (even from an absence too short
        to see between two looks: the reconnect count tells), every node starts afresh."""
        nc = self.events.nc
        previous, self._reconnects = self._reconnects, nc.stats["reconnects"]
        if not nc.is_connected:
            if self._hearing.since is not None:
                log.warning("off the bus: no node is judged until it is back")
            self._hearing = Hearing(since=None)
        elif self._hearing.since is None or self._reconnects != previous:
            log.info("on the bus again: every node has %.1fs from now", self.timeout_s)
            self._hearing = listening(now)

    def _say_if_holding(self, silence: Silence) -> None:
        """Say when a hold-off begins or changes, and when it ends; not at every look."""
        if silence.held and silence.held != self._held:
            log.warning(
                "%d of %d nodes fell silent together (%s): the bus is the likelier fault, so "
                "none is declared lost until most are heard again",
                len(silence.quiet),
                silence.watched,
                ", ".join(silence.quiet),
            )
        elif self._hearing.holding and not silence.hearing.holding:
            log.info("most nodes are heard again: every node has a full timeout from now")
        self._held = silence.held

    async def _declare_lost(self, node_id: str, now: float) -> None:
        node = self.state.nodes[node_id]
        event = NodeLost(
            meta=stamp("telemetry", self.clock),
            node_id=node_id,
            last_seen_ns=self._last_seen_ns.get(node_id, node.registered_at),
            timeout_ns=int(self.timeout_s * 1e9),
        )
        # One loss per registration, however often this loop runs before the fold.
        await self.events.append(event, msg_id=msgids.node_loss(node_id, node.registered_at))
        log.warning("node %s silent for %.1fs: lost", node_id, now - self._last_seen[node_id])


def listening(since: float) -> Hearing:
    """Joining the bus counts as a look: a stall before the first is blindness too."""
    return Hearing(since=since, looked=since)


def _device(gpu: int | None) -> str:
    return "the node" if gpu is None else f"GPU {gpu}"


async def serve(args: argparse.Namespace, events: EventLog) -> None:
    await Telemetry(events, args.node_timeout, recover_s=args.recover_after).run()
