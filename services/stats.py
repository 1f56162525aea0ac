"""What a service counts that the log does not hold (a planning cycle's length, a plan that
lost the race to append, a request refused), sent every few seconds on
``allot.stats.<service>``, outside the log, for the metrics service to serve.

Each message is the service instance's counters since it started, whole: one lost is
made good by the next, and the metrics service sees a restart as the counters starting
again (as Prometheus expects of counters). Only the names in ``KNOWN`` are taken.
"""

import asyncio
import contextlib
import logging
import uuid
from typing import Final

import msgspec
from nats.aio.client import Client as NATS

from allot.proto.subjects import stats_subject

log = logging.getLogger("allot.stats")
EVERY_S: Final = 5.0
# Planning cycle lengths, seconds: from a cycle on a quiet cluster to a very busy one.
CYCLE_BUCKETS: Final = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
MAX_SAMPLES: Final = 1000  # in one message; a service has a few dozen
MAX_LABEL: Final = 64  # characters of a label's value
REQUESTS: Final = "allot_command_requests_total"
REFUSALS: Final = "allot_command_refusals_total"
CYCLES: Final = "allot_plan_cycles_total"
CONFLICTS: Final = "allot_plan_conflicts_total"
HEARTBEATS_REFUSED: Final = "allot_heartbeats_refused_total"


class Sample(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    labels: dict[str, str] = {}
    value: float


class Stats(msgspec.Struct, frozen=True, kw_only=True):
    service: str
    instance: str  # one per process: two planners count apart
    samples: list[Sample]


# name -> (kind, help, the labels it has): what the metrics service serves.
KNOWN: Final = {
    CYCLES: ("counter", "Planning cycles, by whether they decided anything.",
                                ("decided",)),
    CONFLICTS: ("counter", "Plans not appended: another plan came first.", ()),
    "allot_plan_cycle_seconds": ("histogram", "How long a planning cycle took to decide.", ()),
    REQUESTS: ("counter", "Command requests, by command and outcome.",
                                     ("service", "command", "outcome")),
    REFUSALS: ("counter", "Refused requests, by command and the field "
                                     "refused.", ("service", "command", "field")),
    HEARTBEATS_REFUSED: ("counter", "Heartbeats whose health was not read: malformed, "
                                     "or naming another node than their subject.", ()),
}  # fmt: skip


class Counts:
    """A service's counters and its one histogram, and the loop that sends them."""

    def __init__(self, service: str):
        self.service = service
        self.instance = uuid.uuid4().hex[:12]
        self.counters: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
        self.cycle_sum = 0.0
        self.cycle_buckets = [0] * (len(CYCLE_BUCKETS) + 1)  # the last: +Inf

    def add(self, name: str, by: float = 1.0, **labels: str) -> None:
        key = (name, tuple(sorted((k, v[:MAX_LABEL]) for k, v in labels.items())))
        self.counters[key] = self.counters.get(key, 0.0) + by

    def observe_cycle(self, seconds: float) -> None:
        self.cycle_sum += seconds
        index = next((i for i, le in enumerate(CYCLE_BUCKETS) if seconds <= le), -1)
        self.cycle_buckets[index] += 1

    def message(self) -> Stats:
        samples = [
            Sample(name=name, labels=dict(labels), value=value)
            for (name, labels), value in sorted(self.counters.items())
        ]
        if any(self.cycle_buckets):
            cumulative = 0
            for le, count in zip(
                [*map(str, CYCLE_BUCKETS), "+Inf"], self.cycle_buckets, strict=True
            ):
                cumulative += count
                samples.append(Sample(name="allot_plan_cycle_seconds_bucket", labels={"le": le},
                                      value=cumulative))  # fmt: skip
            samples += [
                Sample(name="allot_plan_cycle_seconds_sum", value=self.cycle_sum),
                Sample(name="allot_plan_cycle_seconds_count", value=cumulative),
            ]
        return Stats(service=self.service, instance=self.instance, samples=samples)

    async def send_every(self, nc: NATS, every_s: float = EVERY_S) -> None:
        """Send the counters on ``allot.stats.<service>`` every ``every_s``, for ever."""
        subject = stats_subject(self.service)
        while True:
            with contextlib.suppress(Exception):  # the bus away: the next one carries all
                await nc.publish(subject, msgspec.json.encode(self.message()))
            await asyncio.sleep(every_s)
