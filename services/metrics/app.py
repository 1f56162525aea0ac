"""The cluster as Prometheus metrics (docs/adr/0016), folded from the log and computed by the
simulator's metric functions over each job's outcome (``allot.sim.outcomes``), so a
restarted exporter reports the same values and a live cluster is measured as a simulated
one is.

The values are recomputed in the fold's own task, when the log has been read to its end
(at most every ``refresh`` seconds) and every ``refresh`` seconds while it is quiet (waits
grow with time alone); the HTTP server's thread only hands out the last set.
"""

import argparse
import logging
import math
import time
from collections import Counter
from collections.abc import Iterator

import msgspec
from nats.aio.msg import Msg
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from allot.bus.eventlog import EventLog
from allot.core import JobStatus, State
from allot.core.owed import global_shares
from allot.proto.limits import shown
from allot.proto.subjects import SAMPLES, STATS
from allot.proto.telemetry import GpuSample, decode_samples
from allot.services.runtime import Clock, follow_state
from allot.services.stats import EVERY_S, KNOWN, MAX_LABEL, MAX_SAMPLES, Sample, Stats
from allot.sim.metrics import HOUR_S, JobOutcome, compute, wait_percentiles, wait_s
from allot.sim.outcomes import Outcomes

log = logging.getLogger("allot.metrics")
STALE_S = 3 * EVERY_S  # counts not sent again for this long are of an instance that is gone
MAX_STATS_BYTES = 256 * 1024
SAMPLES_STALE_S = 60.0  # a node's GPU samples older than this are not served
# Submission to start, seconds: from an interactive job's moments to a large gang's hours.
LATENCY_BUCKETS = (0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 1800, 3600, 4 * 3600, 12 * 3600, 86400)


class Metrics:
    def __init__(self, events: EventLog, refresh_s: float, clock: Clock | None = None):
        self.events = events
        self.refresh_s = refresh_s
        self.clock = clock or Clock()
        self.state = State()
        self.outcomes = Outcomes()
        self.families: list[Metric] = []  # replaced whole: the HTTP thread reads it
        self.reported: dict[tuple[str, str], tuple[float, list[Sample]]] = {}  # by instance
        self.sampled: dict[str, tuple[float, list[GpuSample]]] = {}  # node -> its GPUs' load
        self._computed_at = float("-inf")

    def collect(self) -> Iterator[Metric]:
        return iter(self.families)

    async def run(self, host: str, port: int) -> None:
        registry = CollectorRegistry(auto_describe=False)
        registry.register(self)
        start_http_server(port, addr=host, registry=registry)
        log.info("serving metrics on http://%s:%d/metrics", host, port)
        await self.events.nc.subscribe(STATS, cb=self._on_stats)
        await self.events.nc.subscribe(SAMPLES, cb=self._on_samples)
        await follow_state(
            self.events, self.state, self._refresh, self.refresh_s,
            lambda record: self.outcomes.note(self.state, record),
        )  # fmt: skip

    async def _on_stats(self, msg: Msg) -> None:
        stats = taken_stats(msg.data)
        if stats is None:
            log.warning("ignored counts on %s: not counts Allot knows", shown(msg.subject, 200))
            return
        self.reported[(stats.service, stats.instance)] = (self.clock.monotonic(), stats.samples)

    async def _on_samples(self, msg: Msg) -> None:
        """A node's GPU samples, kept only for a registered node and its own devices: the
        subject names the node, and only that node may publish on it."""
        node_id = msg.subject.rsplit(".", 1)[-1]
        node = self.state.nodes.get(node_id)
        if node is None:
            return
        try:
            taken = decode_samples(msg.data)
        except (msgspec.DecodeError, msgspec.ValidationError) as error:
            log.debug("ignored GPU samples of %s: %s", node_id, error)
            return
        devices = {gpu.index for gpu in node.gpus}
        if taken.node_id == node_id:
            mine = {sample.gpu: sample for sample in taken.gpus if sample.gpu in devices}
            self.sampled[node_id] = (self.clock.monotonic(), [mine[g] for g in sorted(mine)])

    async def _refresh(self) -> None:
        if self.clock.monotonic() - self._computed_at < self.refresh_s / 2:
            return  # a burst of events: the tick brings the rest soon enough
        began = time.perf_counter()
        now = self.clock.monotonic()
        for key, (at, _) in list(self.reported.items()):
            if now - at > STALE_S:  # that instance is gone
                del self.reported[key]
        counted = [samples for _, samples in self.reported.values()]
        for node_id, (at, _) in list(self.sampled.items()):
            if now - at > SAMPLES_STALE_S or node_id not in self.state.nodes:
                del self.sampled[node_id]
        loads = {node_id: samples for node_id, (_, samples) in self.sampled.items()}
        self.families = [*families(self.state, self.outcomes, self.clock.now()),
                         *counted_families(counted), *gpu_load(loads)]  # fmt: skip
        self._computed_at = self.clock.monotonic()
        log.debug("metrics at %d in %.3f s", self.state.seq, time.perf_counter() - began)


def families(state: State, outcomes: Outcomes, now: int) -> list[Metric]:
    """Every metric of the cluster as the log folded into ``state`` says, at ``now`` (ns)."""
    now_s = now / 1e9
    jobs = outcomes.at(now_s)
    gpus = sum(len(node.gpus) for node in state.nodes.values() if not node.lost)
    shares = {path: float(share) for path, share in global_shares(state).items()}
    result = compute("live", jobs, gpus, now_s, shares)
    per_account = result["per_account"]
    least = min(per_account, key=lambda a: (per_account[a]["owed_delivered"], a), default=None)

    def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
        return GaugeMetricFamily(name, doc, value=value)

    found: list[Metric] = [
        gauge("allot_log_folded_sequence", "The last sequence of the log folded.", state.seq),
        gauge(
            "allot_occupancy_ratio",
            "GPU-seconds in use over GPU-seconds available, while some job waits.",
            result["occupancy"],
        ),
        gauge(
            "allot_owed_delivered_ratio",
            "GPU-seconds delivered over owed (max-min fair shares, hour by hour), all accounts.",
            result["owed_delivered_overall"],
        ),
        gauge(
            "allot_owed_delivered_min_account_ratio",
            "Delivered over owed GPU-seconds of the least-served account.",
            result["owed_delivered_min_account"],
        ),
    ]
    by_account = [
        ("allot_account_owed_delivered_ratio", "Delivered over owed.", "owed_delivered", 1),
        ("allot_account_owed_gpu_seconds", "Owed by fair share.", "owed_gpu_hours", HOUR_S),
        ("allot_account_delivered_gpu_seconds", "Its jobs ran.", "delivered_gpu_hours", HOUR_S),
    ]
    for name, doc, key, unit in by_account:
        family = GaugeMetricFamily(name, doc, labels=["account"])
        for account, figures in sorted(per_account.items()):
            family.add_metric([account], figures[key] * unit)
        found.append(family)
    least_wait = GaugeMetricFamily(
        "allot_least_served_max_wait_seconds",
        "The longest wait of the least-served account's jobs.",
        labels=["account"],
    )
    if least is not None:
        least_wait.add_metric([least], result["max_wait_least_served_s"])
    found.append(least_wait)
    found += [_waits(jobs, now_s), *_queue(state), _gpus(state), *_nodes(state)]
    found += [_jobs(state), *_preemptions(outcomes), _gpu_seconds(jobs), _latency(jobs)]
    return found


def _waits(jobs: list[JobOutcome], now_s: float) -> Metric:
    """A summary per account and tier: quantiles (nearest rank, as the simulator reports
    them), how many jobs and their waits in all."""
    name = "allot_queue_wait_seconds"
    summary = Metric(
        name,
        "Waits from submission to first start (to now for jobs still waiting).",
        "summary",
    )
    groups: dict[tuple[str, str], list[float]] = {}
    for job in jobs:
        groups.setdefault((job.account, job.tier), []).append(wait_s(job, now_s))
    for (account, tier), waits in sorted(groups.items()):
        labels = {"account": account, "tier": tier}
        for key, value in wait_percentiles(waits).items():
            quantile = str(int(key.removeprefix("wait_p").removesuffix("_s")) / 100)
            summary.add_sample(name, {**labels, "quantile": quantile}, value)
        summary.add_sample(f"{name}_count", labels, len(waits))
        summary.add_sample(f"{name}_sum", labels, sum(waits))
    return summary


def _queue(state: State) -> list[GaugeMetricFamily]:
    depth = GaugeMetricFamily(
        "allot_queue_jobs", "Jobs waiting to be admitted.", labels=["account", "tier"]
    )
    wanted = GaugeMetricFamily(
        "allot_queue_gpus", "GPUs the waiting jobs ask for.", labels=["account", "tier"]
    )
    jobs: Counter[tuple[str, str]] = Counter()
    gpus: Counter[tuple[str, str]] = Counter()
    for job in state.jobs.values():
        if job.status == JobStatus.PENDING:
            key = (job.spec.account, str(job.spec.tier))
            jobs[key] += 1
            gpus[key] += job.spec.total_gpus
    for key in sorted(jobs):
        depth.add_metric(list(key), jobs[key])
        wanted.add_metric(list(key), gpus[key])
    return [depth, wanted]


def _gpus(state: State) -> GaugeMetricFamily:
    family = GaugeMetricFamily(
        "allot_gpus", "GPUs of the nodes that are up, by state.", labels=["state"]
    )
    counts = Counter({"allocated": 0, "free": 0, "unavailable": 0})
    for node in state.nodes.values():
        if node.lost:
            continue
        counts["allocated"] += len(node.allocated)
        idle = len(node.gpus) - len(node.allocated)
        free = len(node.free_gpus()) if node.schedulable else 0  # not a faulty GPU
        counts["free"] += free
        counts["unavailable"] += idle - free
    for name, count in sorted(counts.items()):
        family.add_metric([name], count)
    return family


def _nodes(state: State) -> list[GaugeMetricFamily]:
    up = GaugeMetricFamily("allot_node_up", "1 while the node is heard from.", labels=["node"])
    healthy = GaugeMetricFamily(
        "allot_node_healthy", "1 while the node reports itself healthy.", labels=["node"]
    )
    cordoned = GaugeMetricFamily(
        "allot_node_cordoned", "1 while no new work is placed on the node.", labels=["node"]
    )
    gpu_healthy = GaugeMetricFamily(
        "allot_gpu_healthy",
        "1 while the GPU takes work; 0 with the fault that keeps it from it.",
        labels=["node", "gpu", "uuid", "fault"],
    )
    for node_id, node in sorted(state.nodes.items()):
        up.add_metric([node_id], 0 if node.lost else 1)
        healthy.add_metric([node_id], 1 if node.healthy else 0)
        cordoned.add_metric([node_id], 1 if node.cordoned else 0)
        for gpu in node.gpus:
            fault = node.gpu_faults.get(gpu.index)
            labels = [node_id, str(gpu.index), gpu.uuid, fault.kind if fault else ""]
            gpu_healthy.add_metric(labels, 0 if fault else 1)
    return [up, healthy, cordoned, gpu_healthy]


def gpu_load(sampled: dict[str, list[GpuSample]]) -> list[GaugeMetricFamily]:
    """Each GPU's load, as its node last sampled it (outside the log)."""
    readings = [
        ("allot_gpu_utilization_ratio", "Time the GPU was busy, 0 to 1.", "utilization", 0.01),
        ("allot_gpu_memory_used_bytes", "GPU memory in use.", "memory_used_mib", float(1 << 20)),
        ("allot_gpu_temperature_celsius", "GPU temperature.", "temperature_c", 1.0),
        ("allot_gpu_power_watts", "GPU power draw.", "power_w", 1.0),
    ]
    found = []
    for name, doc, field, unit in readings:
        family = GaugeMetricFamily(name, doc, labels=["node", "gpu"])
        for node_id, samples in sorted(sampled.items()):
            for sample in samples:
                value = getattr(sample, field)
                if value is not None:
                    family.add_metric([node_id, str(sample.gpu)], value * unit)
        found.append(family)
    return found


def _jobs(state: State) -> GaugeMetricFamily:
    family = GaugeMetricFamily("allot_jobs", "Jobs by state.", labels=["state"])
    counts = Counter({str(status): 0 for status in JobStatus})
    counts.update(str(job.status) for job in state.jobs.values())
    for status, count in sorted(counts.items()):
        family.add_metric([status], count)
    return family


def _preemptions(outcomes: Outcomes) -> list[CounterMetricFamily]:
    count = CounterMetricFamily(
        "allot_preemptions", "Jobs stopped to make room, by ground.", labels=["ground"]
    )
    lost = CounterMetricFamily(
        "allot_preemption_lost_gpu_seconds",
        "GPU-seconds of work lost to preemptions (since the last checkpoint), by ground.",
        labels=["ground"],
    )
    for ground, cost in sorted(outcomes.preempted.items()):
        count.add_metric([ground], cost.count)
        lost.add_metric([ground], cost.lost_gpu_s)
    return [count, lost]


def _gpu_seconds(jobs: list[JobOutcome]) -> CounterMetricFamily:
    family = CounterMetricFamily(
        "allot_account_gpu_seconds", "GPU-seconds the account's jobs ran.", labels=["account"]
    )
    used: dict[str, float] = {}
    for job in jobs:
        ran = sum(job.gpus * (end - start) for start, end in job.runs)
        used[job.account] = used.get(job.account, 0.0) + ran
    for account, gpu_s in sorted(used.items()):
        family.add_metric([account], gpu_s)
    return family


def _latency(jobs: list[JobOutcome]) -> HistogramMetricFamily:
    family = HistogramMetricFamily(
        "allot_admission_latency_seconds", "From submission to the first start, of started jobs."
    )
    latencies = [j.first_start_s - j.submit_s for j in jobs if j.first_start_s is not None]
    buckets = [(str(float(le)), sum(1 for x in latencies if x <= le)) for le in LATENCY_BUCKETS]
    buckets.append(("+Inf", len(latencies)))
    family.add_metric([], buckets, sum_value=sum(latencies))
    return family


def taken_stats(data: bytes) -> Stats | None:
    """A service's counts, if they are counts of the names ``KNOWN``, with their labels,
    as finite numbers not below zero, and not too many; else None."""
    if len(data) > MAX_STATS_BYTES:
        return None
    try:
        stats = msgspec.json.decode(data, type=Stats)
    except msgspec.DecodeError:
        return None
    if len(stats.samples) > MAX_SAMPLES:
        return None
    for sample in stats.samples:
        name = sample.name
        for suffix in ("_bucket", "_sum", "_count"):
            if name.endswith(suffix) and name.removesuffix(suffix) in KNOWN:
                name = name.removesuffix(suffix)
        allowed = {"le"} if sample.name.endswith("_bucket") else set()
        if name not in KNOWN or not set(sample.labels) <= allowed | set(KNOWN[name][2]):
            return None
        if not math.isfinite(sample.value) or sample.value < 0:
            return None
        if any(len(v) > MAX_LABEL for v in sample.labels.values()):
            return None
    return stats


def counted_families(reports: list[list[Sample]]) -> list[Metric]:
    """The services' counts, summed over their instances, as families."""
    totals: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for samples in reports:
        for sample in samples:
            key = (sample.name, tuple(sorted(sample.labels.items())))
            totals[key] = totals.get(key, 0.0) + sample.value
    found: list[Metric] = []
    for name, (kind, doc, labels) in KNOWN.items():
        if kind == "counter":
            family = CounterMetricFamily(name, doc, labels=list(labels))
            for (sample_name, pairs), value in sorted(totals.items()):
                if sample_name == name:
                    family.add_metric([dict(pairs).get(label, "") for label in labels], value)
            found.append(family)
        elif kind == "histogram":
            buckets = sorted(
                ((dict(pairs)["le"], value) for (n, pairs), value in totals.items()
                 if n == f"{name}_bucket"),
                key=lambda bucket: float(bucket[0]),
            )  # fmt: skip
            histogram = HistogramMetricFamily(name, doc)
            if buckets:
                histogram.add_metric([], buckets, sum_value=totals.get((f"{name}_sum", ()), 0.0))
            found.append(histogram)
    return found


async def serve(args: argparse.Namespace, events: EventLog) -> None:
    await Metrics(events, args.refresh).run(args.host, args.port)
