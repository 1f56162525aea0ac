"""Scheduling-quality metrics of one simulated run, from what happened to each job.

- ``occupancy``: GPU-seconds in use over GPU-seconds available, counted only while some
  job waits (an idle cluster with nothing to run is not a scheduler's fault). What it
  misses, by what kept the GPUs idle, the simulator tallies beside (``allot.sim.idle``).
- ``owed`` and ``delivered``, hour by hour: the cluster's GPU-hours are owed to the
  accounts with demand in that hour by their shares, each capped at its demand, what a
  capped account does not need going to the others (max-min fairness); delivered is what
  its jobs ran. ``owed_delivered_overall`` sums over accounts, ``_min_account`` is the
  worst-served account's ratio, ``jain_owed_delivered`` Jain's index over the ratios.
- waits from submission to first start (jobs never started wait until the run ends);
  ``debug_wait_p90_s`` over interactive jobs; ``max_wait_least_served_s`` is the longest
  wait of the worst-served account.
- ``preemptions_per_hour`` over the makespan, ``lost_gpu_hours_per_preemption``,
  ``mean_jct_s`` over finished jobs, ``makespan_s`` from the first submission to the end.
- ``node_failures``: runs cut off by a failed node; ``lost_gpu_hours_to_failures``: the work
  they lost. While nodes are down (``down``), the GPUs available, to use and to owe, are
  fewer.

Where accounts have budgets of GPU time (R8, the Ai2 model), per budget and only then:

- ``owed``, hour by hour: the budget's rate (its GPU time per period, spread evenly over
  the period) capped at the demand of the budget's account and all accounts below it in
  that hour (the GPUs their jobs wanted, waiting or running): "the allocation capped hour
  by hour at the team's actual demand". Nodes that are down change nothing: a grant is
  GPU time, not a part of the cluster.
- ``delivered``: the GPU time its jobs ran over the whole run, funded or not (what the
  team got, as Ai2 counts it: its unfunded jobs were a part of what was delivered);
  ``funded_gpu_hours`` is the part that ran funded. Summed over the run, not capped hour by
  hour: a budget is GPU time per period, which a team may spend unevenly within it.
- ``budget_owed_delivered_overall``: over all budgets, delivered (each budget's capped at
  what it was owed, so that one over-served budget hides no other's deficit) over owed;
  ``budget_owed_delivered_min``: the worst budget's delivered over owed, uncapped
  (``budget_least_served`` names it).
- ``unfunded_share``: the GPU time of unfunded runs over all GPU time run, cluster-wide.
- ``funded_stops_inside_min_runtime``: stops asked of a funded run that had run less than
  its minimum runtime. Funded work is protected for its minimum runtime, so anything but 0
  is a bug in the planner.
"""

import hashlib
import itertools
import math
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

HOUR_S = 3600.0


class JobOutcome(msgspec.Struct, kw_only=True):
    job_id: str
    account: str
    tier: str
    gpus: int  # all workers together
    submit_s: float
    first_start_s: float | None = None
    end_s: float | None = None  # None: not finished when the run ended
    runs: list[tuple[float, float]] = []  # when it held GPUs
    preemptions: int = 0
    lost_gpu_s: float = 0.0  # to preemptions
    failures: int = 0  # runs cut off by a failed node
    failure_lost_gpu_s: float = 0.0
    # Added with budgets; left out of the decisions digest while unset, so runs without
    # budgets keep the digests they always had.
    funded_runs: list[tuple[float, float]] = []  # those of ``runs`` admitted funded
    funded_stops_inside_min_runtime: int = 0


# JobOutcome's fields left out of ``decisions_digest`` while they hold their default.
_DIGESTED_ONCE_SET = ("funded_runs", "funded_stops_inside_min_runtime")


def decisions_digest(outcomes: Iterable[JobOutcome]) -> str:
    """SHA-256 over every job's runs, end and preemptions, in job-id order: two runs of a
    trace decided alike exactly when their digests are equal (how a change that must not
    change a decision is checked on whole traces)."""
    ordered = sorted(outcomes, key=lambda o: o.job_id)
    return hashlib.sha256(msgspec.json.encode([_digested(o) for o in ordered])).hexdigest()


def _digested(outcome: JobOutcome) -> dict[str, Any]:
    """The outcome's fields as it encodes them (in their order), less those of
    ``_DIGESTED_ONCE_SET`` that are unset."""
    fields = msgspec.structs.asdict(outcome)
    for name in _DIGESTED_ONCE_SET:
        if not fields[name]:
            del fields[name]
    return fields


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile; 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def compute(
    policy: str,
    outcomes: list[JobOutcome],
    gpus: int,
    end_s: float,
    shares: dict[str, float] | None = None,
    wall_s: float = 0.0,
    down: list[tuple[float, float, int]] | None = None,
    budgets: dict[str, float] | None = None,
) -> dict[str, Any]:
    """Every metric for one run ending at ``end_s`` on ``gpus`` GPUs, of which those of
    ``down`` were not there: (from, until, GPUs) for each node while it was down within
    the run. ``budgets``: account -> the GPU-seconds per hour its budget grants; with
    them, the budget metrics too."""
    accounts = sorted({o.account for o in outcomes})
    weights = {a: (shares or {}).get(a, 1.0) for a in accounts}
    down = down or []
    owed, delivered = _owed_delivered(outcomes, gpus, end_s, weights, down)
    ratio = {a: delivered[a] / owed[a] if owed[a] else 1.0 for a in accounts}
    least = min(accounts, key=lambda a: (ratio[a], a)) if accounts else None
    waits = {o.job_id: wait_s(o, end_s) for o in outcomes}
    start = min((o.submit_s for o in outcomes), default=0.0)
    makespan = max(0.0, end_s - start)
    preemptions = sum(o.preemptions for o in outcomes)
    completion = [o.end_s - o.submit_s for o in outcomes if o.end_s is not None]
    result: dict[str, Any] = {
        "policy": policy,
        "jobs": len(outcomes),
        "gpus": gpus,
        "occupancy": _occupancy(outcomes, gpus, end_s, down),
        "owed_delivered_overall": sum(delivered.values()) / sum(owed.values())
        if sum(owed.values())
        else 1.0,
        "owed_delivered_min_account": ratio[least] if least else 1.0,
        "jain_owed_delivered": _jain(list(ratio.values())),
        **wait_percentiles([waits[o.job_id] for o in outcomes]),
        "debug_wait_p90_s": percentile(
            [waits[o.job_id] for o in outcomes if o.tier == "interactive"], 90
        ),
        "max_wait_least_served_s": max(
            (waits[o.job_id] for o in outcomes if o.account == least), default=0.0
        ),
        "preemptions_per_hour": preemptions / (makespan / HOUR_S) if makespan else 0.0,
        "lost_gpu_hours_per_preemption": sum(o.lost_gpu_s for o in outcomes) / HOUR_S / preemptions
        if preemptions
        else 0.0,
        "node_failures": sum(o.failures for o in outcomes),
        "lost_gpu_hours_to_failures": sum(o.failure_lost_gpu_s for o in outcomes) / HOUR_S,
        "mean_jct_s": sum(completion) / len(completion) if completion else 0.0,
        "makespan_s": makespan,
        "sim_wall_s": wall_s,
    }
    result["per_account"] = {
        a: {
            "jobs": sum(o.account == a for o in outcomes),
            "owed_gpu_hours": owed[a] / HOUR_S,
            "delivered_gpu_hours": delivered[a] / HOUR_S,
            "owed_delivered": ratio[a],
            **wait_percentiles([waits[o.job_id] for o in outcomes if o.account == a]),
        }
        for a in accounts
    }
    if budgets:
        result.update(budget_metrics(outcomes, end_s, budgets))
    return result


def budget_metrics(
    outcomes: list[JobOutcome], end_s: float, budgets: dict[str, float]
) -> dict[str, Any]:
    """The budget metrics of the module docstring; ``budgets``: account -> GPU-seconds
    per hour."""
    demand = _demand(outcomes, end_s)
    per_budget = {}
    for path, rate in sorted(budgets.items()):
        below = {o.account for o in outcomes if _under(o.account, path)}
        owed = 0.0
        for hour, wanted in demand.items():
            lasted = min(end_s, (hour + 1) * HOUR_S) - hour * HOUR_S  # of the hour, in the run
            owed += min(rate * lasted / HOUR_S, sum(wanted.get(a, 0.0) for a in below))
        theirs = [o for o in outcomes if o.account in below]
        delivered = sum(_gpu_s(o, o.runs, end_s) for o in theirs)
        per_budget[path] = {
            "owed_gpu_hours": owed / HOUR_S,
            "delivered_gpu_hours": delivered / HOUR_S,
            "funded_gpu_hours": sum(_gpu_s(o, o.funded_runs, end_s) for o in theirs) / HOUR_S,
            "owed_delivered": delivered / owed if owed else 1.0,
        }
    owed_all = sum(b["owed_gpu_hours"] for b in per_budget.values())
    kept = sum(min(b["delivered_gpu_hours"], b["owed_gpu_hours"]) for b in per_budget.values())
    least = min(per_budget, key=lambda p: (per_budget[p]["owed_delivered"], p))
    ran = sum(_gpu_s(o, o.runs, end_s) for o in outcomes)
    funded = sum(_gpu_s(o, o.funded_runs, end_s) for o in outcomes)
    return {
        "budget_owed_delivered_overall": kept / owed_all if owed_all else 1.0,
        "budget_owed_delivered_min": per_budget[least]["owed_delivered"],
        "budget_least_served": least,
        "unfunded_share": (ran - funded) / ran if ran else 0.0,
        "funded_stops_inside_min_runtime": sum(o.funded_stops_inside_min_runtime for o in outcomes),
        "per_budget": per_budget,
    }


def _under(account: str, path: str) -> bool:
    """Whether ``account`` is ``path`` or below it: what a budget of ``path`` covers."""
    return account == path or account.startswith(path + "/")


def _gpu_s(outcome: JobOutcome, runs: list[tuple[float, float]], end_s: float) -> float:
    return sum(outcome.gpus * max(0.0, min(e, end_s) - s) for s, e in runs)


def wait_s(outcome: JobOutcome, end_s: float) -> float:
    """From submission to first start (to ``end_s`` for a job that never started)."""
    started = outcome.first_start_s if outcome.first_start_s is not None else end_s
    return max(0.0, started - outcome.submit_s)


def wait_percentiles(waits: list[float]) -> dict[str, float]:
    """``wait_p50_s`` ... ``wait_p99_s``, nearest-rank."""
    return {f"wait_p{q}_s": percentile(waits, q) for q in (50, 90, 95, 99)}


def _jain(values: list[float]) -> float:
    if not values or not any(values):
        return 1.0
    return sum(values) ** 2 / (len(values) * sum(v * v for v in values))


def _occupancy(
    outcomes: Iterable[JobOutcome], gpus: int, end_s: float, down: list[tuple[float, float, int]]
) -> float:
    """GPU-seconds in use while some job waits, over GPU-seconds available then."""
    # (time, waiting delta, GPUs-in-use delta, GPUs-available delta)
    changes: list[tuple[float, int, int, int]] = []
    for o in outcomes:
        for begin, until in _waiting(o, end_s):
            changes += [(begin, 1, 0, 0), (until, -1, 0, 0)]
        for s, e in o.runs:
            changes += [(s, 0, o.gpus, 0), (min(e, end_s), 0, -o.gpus, 0)]
    for start, until, n in down:
        changes += [(start, 0, 0, -n), (until, 0, 0, n)]
    changes.sort()
    waiting = used = 0
    available = gpus
    busy_gpu_s = available_gpu_s = 0.0
    last = changes[0][0] if changes else 0.0
    for at, dw, du, da in changes:
        if waiting > 0 and at > last:
            busy_gpu_s += used * (at - last)
            available_gpu_s += available * (at - last)
        last = at
        waiting += dw
        used += du
        available += da
    return busy_gpu_s / available_gpu_s if available_gpu_s else 1.0


def _waiting(o: JobOutcome, end_s: float) -> list[tuple[float, float]]:
    """When it waited: before its first run, between runs (it was preempted), and after
    its last one if it had not finished when the run ended."""
    spans, since = [], o.submit_s
    for start, stop in o.runs:
        if start > since:
            spans.append((since, start))
        since = stop
    if o.end_s is None and since < end_s:
        spans.append((since, end_s))
    return spans


def _owed_delivered(
    outcomes: list[JobOutcome],
    gpus: int,
    end_s: float,
    weights: dict[str, float],
    down: list[tuple[float, float, int]],
) -> tuple[dict[str, float], dict[str, float]]:
    """GPU-seconds owed and delivered per account, hour by hour."""
    missing = down_by_hour(down)
    demand = _demand(outcomes, end_s)
    delivered = dict.fromkeys(weights, 0.0)
    for o in outcomes:
        for s, e in o.runs:
            delivered[o.account] += o.gpus * max(0.0, min(e, end_s) - s)
    owed = dict.fromkeys(weights, 0.0)
    for hour, wanted_now in sorted(demand.items()):
        # The GPUs there were in the part of the hour the run lasted.
        capacity = gpus * (min(end_s, (hour + 1) * HOUR_S) - hour * HOUR_S) - missing.get(hour, 0.0)
        for account, amount in _water_fill(capacity, wanted_now, weights).items():
            owed[account] += amount
    return owed, delivered


def _demand(outcomes: list[JobOutcome], end_s: float) -> dict[int, dict[str, float]]:
    """Hour -> account -> GPU-seconds its jobs wanted in that hour, waiting or running."""
    demand: dict[int, dict[str, float]] = {}
    # Whole hours a job wants its GPUs through, as changes in GPUs wanted per account:
    # a job that waits months adds two entries, not thousands.
    steps: dict[str, dict[int, int]] = {}
    for o in outcomes:
        # It wants its GPUs from submission until it ends (or the run does).
        end = o.end_s if o.end_s is not None else end_s
        first, last = int(o.submit_s // HOUR_S), int(end // HOUR_S)
        if first == last:
            _want(demand, first, o.account, o.gpus * (end - o.submit_s))
        else:
            _want(demand, first, o.account, o.gpus * ((first + 1) * HOUR_S - o.submit_s))
            _want(demand, last, o.account, o.gpus * (end - last * HOUR_S))
            change = steps.setdefault(o.account, {})
            change[first + 1] = change.get(first + 1, 0) + o.gpus
            change[last] = change.get(last, 0) - o.gpus
    for account, change in steps.items():
        wanted, hours = 0, sorted(change)
        for hour, after in itertools.pairwise(hours):
            wanted += change[hour]
            for whole in range(hour, after):
                _want(demand, whole, account, wanted * HOUR_S)
    return demand


def down_by_hour(down: list[tuple[float, float, int]]) -> dict[int, float]:
    """Hour -> GPU-seconds of the nodes that were down in it ((from, until, GPUs) each)."""
    missing: dict[int, float] = {}
    for start, until, n in down:
        for hour in range(int(start // HOUR_S), int(until // HOUR_S) + 1):
            within = min(until, (hour + 1) * HOUR_S) - max(start, hour * HOUR_S)
            if within > 0:
                missing[hour] = missing.get(hour, 0.0) + n * within
    return missing


def _want(demand: dict[int, dict[str, float]], hour: int, account: str, gpu_s: float) -> None:
    if gpu_s > 0:
        wanted = demand.setdefault(hour, {})
        wanted[account] = wanted.get(account, 0.0) + gpu_s


def _water_fill(
    capacity: float, wanted: dict[str, float], weights: dict[str, float]
) -> dict[str, float]:
    """Max-min fair shares of ``capacity``, by weight, each capped at what it wants."""
    given = dict.fromkeys(wanted, 0.0)
    open_ = {a for a, w in wanted.items() if w > 0}
    left = capacity
    while open_ and left > 1e-9:
        total = sum(weights[a] for a in open_)
        offer = {a: left * weights[a] / total for a in open_}
        done = {a for a in open_ if wanted[a] - given[a] <= offer[a]}
        if not done:
            for a in open_:
                given[a] += offer[a]
            break
        for a in sorted(done):
            left -= wanted[a] - given[a]
            given[a] = wanted[a]
        open_ -= done
    return given
