"""The workloads of the robustness sweep (``allot sim sweep``): slices of the real traces
and seeded synthetic mixes, each re-based to start at 0, filled, and scaled to a demand.

The cluster is fixed: ``CLUSTER`` (16 nodes x 8 GPUs, 128 GPUs). A job no block of it
could hold (Philly's 12- and 24-GPU single-worker jobs on 8-GPU nodes) is left out of a
slice, so every job of a slice can run.

Slices:

- ``philly-w<k>``: two-week windows of the Philly trace, laid back to back from its last
  submission (the first days of the trace hold almost no jobs): 7 disjoint windows, plus
  6 windows offset from them by one week (``philly-w<k>.5``).
- ``alibaba-w<k>``: 5 disjoint one-week windows of the Alibaba pods, back to back from the
  last creation (the pods before them are a few dozen spread over 115 days).
- ``synthetic-s<seed>``: ``allot.sim.synthetic``'s mixes, one per seed.

Size: a slice holds at most ``MAX_JOBS`` (3,000) jobs; a window with more keeps a seeded uniform
sample of them (the window's mix and arrival pattern, thinned), so that the whole sweep
runs in CI's reach. Each slice is filled (``allot.sim.trace.Fill``) with its own seed,
drawn from its name.

Demand: a slice's demand is the GPU-seconds its jobs ask for (GPUs x workers x duration)
over its span (from its first to its last submission) in units of the cluster's GPUs:
``demand = sum(gpus * workers * duration_s) / (cluster_gpus * span_s)``. ``at_demand``
scales the submission times by one factor (compressing or stretching the arrivals, keeping
their order and their pattern) so that the demand equals the target; durations, sizes and
everything else are left as they are.

Where a slice's demand lies largely in jobs that run on long after its last arrival
(the Alibaba pods that live for months, Philly's jobs of weeks), the cluster is less
loaded while jobs arrive than the demand says: ``load_in_span`` tells how much, and each
run reports it.
"""

import itertools
import random
import zlib
from collections.abc import Callable
from pathlib import Path

import msgspec

from allot.sim.simulator import Settings
from allot.sim.synthetic import synthetic_jobs
from allot.sim.trace import Fill, TraceJob, filled, read_alibaba, read_philly

CLUSTER = Settings(nodes=16, gpus_per_node=8)
MAX_JOBS = 3000
QUICK_JOBS = 300  # per slice, for ``--quick``
DAY_S = 86400.0
PHILLY_WINDOWS = 7  # disjoint two-week windows; 6 more between them
ALIBABA_WINDOWS = 5  # disjoint one-week windows
SYNTHETIC_SEEDS = tuple(range(1, 13))


class Slice(msgspec.Struct, frozen=True, kw_only=True):
    """One workload: ``jobs`` re-based to start at 0 and filled, not yet scaled."""

    name: str
    family: str  # philly, alibaba or synthetic
    fill: Fill
    jobs: list[TraceJob]


def capacity_gpus(settings: Settings) -> int:
    return settings.nodes * settings.gpus_per_node


def fits(job: TraceJob, settings: Settings) -> bool:
    """Some block of the cluster could hold the job: each worker on one node, the gang on
    the whole cluster at most."""
    return job.gpus <= settings.gpus_per_node and job.gpus * job.workers <= capacity_gpus(settings)


def demanded_gpu_s(jobs: list[TraceJob]) -> float:
    return sum(j.gpus * j.workers * j.duration_s for j in jobs)


def span_s(jobs: list[TraceJob]) -> float:
    times = [j.submit_s for j in jobs]
    return max(times) - min(times) if times else 0.0


def demand(jobs: list[TraceJob], settings: Settings) -> float:
    """GPU-seconds demanded over the span, as a multiple of the cluster's GPU-seconds."""
    span = span_s(jobs)
    return demanded_gpu_s(jobs) / (capacity_gpus(settings) * span) if span else float("inf")


def load_in_span(jobs: list[TraceJob], settings: Settings) -> float:
    """What ``demand`` leaves out: the GPU-seconds the jobs would run within the span, each
    started as it arrives, in units of the cluster's GPU-seconds over the span. Lower than
    the demand where much of it lies in jobs that run on long after the last arrival."""
    start, span = min((j.submit_s for j in jobs), default=0.0), span_s(jobs)
    if not span:
        return float("inf")
    inside = sum(j.gpus * j.workers * min(j.duration_s, start + span - j.submit_s) for j in jobs)
    return inside / (capacity_gpus(settings) * span)


def at_demand(jobs: list[TraceJob], multiple: float, settings: Settings) -> list[TraceJob]:
    """The jobs with their submission times scaled so that their demand is ``multiple``."""
    span = span_s(jobs)
    if not span:
        raise ValueError("a slice whose jobs all arrive at once has no demand to scale")
    target_span = demanded_gpu_s(jobs) / (multiple * capacity_gpus(settings))
    factor = target_span / span
    return [msgspec.structs.replace(j, submit_s=j.submit_s * factor) for j in jobs]


def make_slice(
    name: str, family: str, jobs: list[TraceJob], settings: Settings, max_jobs: int
) -> Slice:
    """The jobs that fit, thinned to ``max_jobs`` by a seeded sample, re-based to start at
    0 and filled with a seed drawn from the name."""
    seed = zlib.crc32(name.encode())  # not hash(): the same in every process
    kept = [j for j in jobs if fits(j, settings)]
    if len(kept) > max_jobs:
        chosen = sorted(random.Random(seed).sample(range(len(kept)), max_jobs))
        kept = [kept[i] for i in chosen]
    start = min((j.submit_s for j in kept), default=0.0)
    rebased = [msgspec.structs.replace(j, submit_s=j.submit_s - start) for j in kept]
    fill = Fill(seed=seed)
    return Slice(name=name, family=family, fill=fill, jobs=filled(rebased, fill))


def windows(
    jobs: list[TraceJob], length_s: float, count: int, offset: bool
) -> list[tuple[str, list[TraceJob]]]:
    """``count`` disjoint windows of ``length_s`` laid back to back, the last ending with
    the last submission; with ``offset``, also the ``count - 1`` windows half a length
    later than each of the others. Named by their order in time."""
    end = max(j.submit_s for j in jobs)
    starts = [end - (count - k) * length_s for k in range(count)]
    named = [(f"w{k + 1}", s) for k, s in enumerate(starts)]
    if offset:
        named += [(f"w{k + 1}.5", s + length_s / 2) for k, s in enumerate(starts[:-1])]
    ordered = sorted(jobs, key=lambda j: j.submit_s)
    out = []
    for label, start in sorted(named, key=lambda n: n[1]):
        last = start + length_s
        # The last window keeps the last submission itself.
        inside = [j for j in ordered if start <= j.submit_s < last or j.submit_s == end == last]
        out.append((label, inside))
    return out


def philly_slices(path: Path, settings: Settings, max_jobs: int) -> list[Slice]:
    jobs = read_philly(path)
    return [
        make_slice(f"philly-{label}", "philly", inside, settings, max_jobs)
        for label, inside in windows(jobs, 14 * DAY_S, PHILLY_WINDOWS, offset=True)
    ]


def alibaba_slices(path: Path, settings: Settings, max_jobs: int) -> list[Slice]:
    jobs = read_alibaba(path)
    return [
        make_slice(f"alibaba-{label}", "alibaba", inside, settings, max_jobs)
        for label, inside in windows(jobs, 7 * DAY_S, ALIBABA_WINDOWS, offset=False)
    ]


def synthetic_slices(settings: Settings, max_jobs: int, seeds: tuple[int, ...]) -> list[Slice]:
    return [
        make_slice(f"synthetic-s{seed}", "synthetic", synthetic_jobs(seed, max_jobs),
                   settings, max_jobs)
        for seed in seeds
    ]  # fmt: skip


def default_slices(
    traces: Path, settings: Settings = CLUSTER, max_jobs: int = MAX_JOBS
) -> tuple[list[Slice], list[str]]:
    """Every slice the traces folder allows, and a note for each trace it lacks."""
    found: list[Slice] = []
    notes = []
    readers: list[tuple[str, Callable[[Path, Settings, int], list[Slice]]]] = [
        ("philly.csv", philly_slices),
        ("alibaba-openb-pods.csv", alibaba_slices),
    ]
    for file, reader in readers:
        path = traces / file
        if path.is_file():
            found += reader(path, settings, max_jobs)
        else:
            notes.append(f"{path} not found: its slices are left out")
    found += synthetic_slices(settings, max_jobs, SYNTHETIC_SEEDS)
    return found, notes


def spread_pick(slices: list[Slice], count: int) -> list[Slice]:
    """The first ``count`` slices taking the families in turn (one of each first), in the
    order of the list."""
    families: dict[str, list[Slice]] = {}
    for one in slices:
        families.setdefault(one.family, []).append(one)
    turns = [s for row in itertools.zip_longest(*families.values()) for s in row if s]
    picked = {id(s) for s in turns[:count]}
    return [s for s in slices if id(s) in picked]
