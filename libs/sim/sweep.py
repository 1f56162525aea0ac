"""The robustness sweep: every slice (``allot.sim.slices``) at every demand level under every
policy, each run the simulator's own ``run_policy``, spread over worker processes; then
the spread of the metrics per policy and the check of ``allot``'s fairness criteria.

A run's row is its metrics (``allot.sim.metrics``) with the slice, its family, the demand
level and ``worst_account`` (the account of ``owed_delivered_min_account``). Everything in
a row but ``sim_wall_s`` is the same from one sweep to the next: the slices, their fills
and the simulator are seeded, and rows are put in the order of the slices, demand levels
and policies, whichever worker ran them when.
"""

import concurrent.futures
import statistics
import sys
from collections.abc import Callable
from typing import Any

import msgspec

from allot.core import Policy
from allot.sim.metrics import percentile
from allot.sim.simulator import Settings, run_policy
from allot.sim.slices import Slice, at_demand, load_in_span

DEFAULT_DEMANDS = (1.5, 2.0, 3.0)
DEFAULT_POLICIES = ("fifo", "priority", "kueue", "slurm", "allot")
# The four metrics the sweep judges by, and whether more is better.
JUDGED = (
    ("occupancy", True),
    ("owed_delivered_overall", True),
    ("owed_delivered_min_account", True),
    ("debug_wait_p90_s", False),
)
WORST_ACCOUNT_FLOOR = 0.95  # (a): in every run
OCCUPANCY_FLOOR = 0.98  # (b): in runs of at least OCCUPANCY_FROM_DEMAND
OCCUPANCY_FROM_DEMAND = 2.0
CHECKED_POLICY = "allot"


class Run(msgspec.Struct, frozen=True, kw_only=True):
    slice: Slice
    demand: float
    policy_name: str
    policy: Policy
    settings: Settings


def run_one(run: Run) -> dict[str, Any]:
    """One simulation: the slice scaled to the demand level under the policy."""
    jobs = at_demand(run.slice.jobs, run.demand, run.settings)
    result, _ = run_policy(jobs, run.settings, run.policy, run.policy_name)
    ratios = result["per_account"]
    worst = min(ratios, key=lambda a: (ratios[a]["owed_delivered"], a)) if ratios else None
    return {
        "slice": run.slice.name,
        "family": run.slice.family,
        "demand": run.demand,
        "fill": run.slice.fill.describe(),
        "worst_account": worst,
        "load_in_span": load_in_span(jobs, run.settings),
        **result,
    }


def _cost(run: Run) -> tuple[bool, float, int]:
    """Roughly how long a run takes, to start the longest first (``allot`` is the slowest
    policy, and more demand means longer queues to plan)."""
    return (run.policy_name == CHECKED_POLICY, run.demand, len(run.slice.jobs))


def sweep(
    slices: list[Slice],
    demands: list[float],
    policies: list[tuple[str, Policy]],
    settings: Settings,
    workers: int,
    progress: Callable[[int, int], None] | None = None,
) -> list[dict[str, Any]]:
    """The rows of every run, in the order of the slices, demand levels and policies."""
    runs = [
        Run(slice=s, demand=d, policy_name=name, policy=policy, settings=settings)
        for s in slices
        for d in demands
        for name, policy in policies
    ]
    rows: list[dict[str, Any] | None] = [None] * len(runs)
    order = sorted(range(len(runs)), key=lambda i: _cost(runs[i]), reverse=True)
    done = 0
    if workers <= 1:
        for i in order:
            rows[i] = run_one(runs[i])
            done += 1
            if progress:
                progress(done, len(runs))
    else:
        with concurrent.futures.ProcessPoolExecutor(max_workers=workers) as pool:
            futures = {pool.submit(run_one, runs[i]): i for i in order}
            for future in concurrent.futures.as_completed(futures):
                rows[futures[future]] = future.result()
                done += 1
                if progress:
                    progress(done, len(runs))
    return [row for row in rows if row is not None]


def print_progress(done: int, total: int) -> None:
    if done == total or done % max(1, total // 20) == 0:
        print(f"sweep: {done}/{total} runs", file=sys.stderr, flush=True)


# --- the spread of the metrics -----------------------------------------------------------


def spread(values: list[float]) -> dict[str, float]:
    """Minimum, median, 10th and 90th percentile (nearest rank) and maximum."""
    return {
        "min": min(values),
        "median": statistics.median(values),
        "p10": percentile(values, 10),
        "p90": percentile(values, 90),
        "max": max(values),
    }


def summary(rows: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    """Per policy (in the order of the rows), the spread of each judged metric."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for policy in dict.fromkeys(r["policy"] for r in rows):
        mine = [r for r in rows if r["policy"] == policy]
        out[policy] = {key: spread([r[key] for r in mine]) for key, _ in JUDGED}
    return out


# --- the criteria --------------------------------------------------------------------------


class Failure(msgspec.Struct, frozen=True, kw_only=True):
    criterion: str  # a, b or c
    slice: str
    demand: float
    detail: str


def _shown(key: str, value: float) -> float:
    """A metric as the report shows it: ratios to 4 decimals, waits to whole seconds. Two
    runs whose shown values are equal match."""
    return round(value) if key.endswith("_s") else round(value, 4)


def matches_or_beats(other: dict[str, Any], checked: dict[str, Any]) -> bool:
    """``other`` is at least as good as ``checked`` on every judged metric."""
    for key, more_is_better in JUDGED:
        mine, theirs = _shown(key, checked[key]), _shown(key, other[key])
        if (theirs < mine) if more_is_better else (theirs > mine):
            return False
    return True


def _rivalry(other: dict[str, Any], checked: dict[str, Any]) -> str:
    """How ``other`` matches or beats ``checked``: ties on all four (as where nothing ever
    waits) are told apart from a lead on some."""
    ahead = [k for k, _ in JUDGED if _shown(k, other[k]) != _shown(k, checked[k])]
    return f"{other['policy']} ahead on {', '.join(ahead)}" if ahead else f"{other['policy']} ties"


def failures(rows: list[dict[str, Any]], checked: str = CHECKED_POLICY) -> list[Failure]:
    """Where ``checked``'s runs miss a criterion:

    (a) the worst-served account gets at least ``WORST_ACCOUNT_FLOOR`` of what it is owed;
    (b) occupancy is at least ``OCCUPANCY_FLOOR`` where demand is ``OCCUPANCY_FROM_DEMAND``
        or more;
    (c) no other policy matches or beats it on all four judged metrics in the same slice
        at the same demand.
    """
    found = []
    by_run: dict[tuple[str, float], list[dict[str, Any]]] = {}
    for row in rows:
        by_run.setdefault((row["slice"], row["demand"]), []).append(row)
    for (name, demand), same in by_run.items():
        mine = next((r for r in same if r["policy"] == checked), None)
        if mine is None:
            continue
        worst = mine["owed_delivered_min_account"]
        if worst < WORST_ACCOUNT_FLOOR:
            detail = f"worst account {mine['worst_account']} at {worst:.3f}"
            found.append(Failure(criterion="a", slice=name, demand=demand, detail=detail))
        if demand >= OCCUPANCY_FROM_DEMAND and mine["occupancy"] < OCCUPANCY_FLOOR:
            found.append(Failure(criterion="b", slice=name, demand=demand,
                                 detail=f"occupancy {mine['occupancy']:.3f}"))  # fmt: skip
        rivals = [r for r in same if r is not mine and matches_or_beats(r, mine)]
        if rivals:
            found.append(Failure(criterion="c", slice=name, demand=demand,
                                 detail="; ".join(_rivalry(r, mine) for r in rivals)))  # fmt: skip
    return found
