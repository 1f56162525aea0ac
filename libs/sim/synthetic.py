"""Seeded synthetic workloads that stress fairness where the real traces do not: one
account of many short 1-GPU jobs against accounts of long multi-node gangs and of long
work that cannot resume, beside ordinary accounts.

The mix of one seed (``synthetic_jobs(seed, count)``), arrivals uniform over a week (the
sweep rescales them to its demand anyway):

- ``syn/short``: half the jobs, all 1 GPU: 70% interactive (1-15 min), 30% few-minute
  batch (2-10 min).
- ``syn/gang-<k>`` (1 or 2 accounts): 5% of the jobs, gangs of 2-8 workers of 8 GPUs
  (16-64 GPUs) running 1 hour to 3 days (log-uniform); resumable or not as the fill says.
- ``syn/nonresumable-<k>`` (1 or 2 accounts): 10% of the jobs, batch of 1, 2, 4 or 8 GPUs
  running 2 hours to 1 day (log-uniform) that cannot resume: a preempted one starts over.
- ``syn/ordinary-<k>`` (2 or 3 accounts): the rest, 1-8 GPUs (mostly 1) running 30 s to
  2 days (log-normal, median 30 min); tier and resumability as the fill says.

Every account is drawn in turn for its own jobs from one ``random.Random(seed)``: the
same seed and count give the same jobs.
"""

import math
import random

from allot.sim.trace import TraceJob

WEEK_S = 7 * 86400.0
HOUR_S = 3600.0
SHORT_SHARE, GANG_SHARE, NONRESUMABLE_SHARE = 0.5, 0.05, 0.10


def _log_uniform(rng: random.Random, low: float, high: float) -> float:
    return math.exp(rng.uniform(math.log(low), math.log(high)))


def _short(rng: random.Random, job_id: str, account: str) -> TraceJob:
    interactive = rng.random() < 0.7
    duration = rng.uniform(60, 15 * 60) if interactive else rng.uniform(120, 600)
    return TraceJob(
        job_id=job_id, submit_s=rng.uniform(0, WEEK_S), duration_s=duration, gpus=1,
        account=account, tier="interactive" if interactive else "batch",
    )  # fmt: skip


def _gang(rng: random.Random, job_id: str, account: str) -> TraceJob:
    return TraceJob(
        job_id=job_id, submit_s=rng.uniform(0, WEEK_S),
        duration_s=_log_uniform(rng, HOUR_S, 72 * HOUR_S), gpus=8,
        workers=rng.randint(2, 8), account=account, tier="batch",
    )  # fmt: skip


def _nonresumable(rng: random.Random, job_id: str, account: str) -> TraceJob:
    return TraceJob(
        job_id=job_id, submit_s=rng.uniform(0, WEEK_S),
        duration_s=_log_uniform(rng, 2 * HOUR_S, 24 * HOUR_S), gpus=rng.choice((1, 2, 4, 8)),
        account=account, tier="batch", resumable=False,
    )  # fmt: skip


def _ordinary(rng: random.Random, job_id: str, account: str) -> TraceJob:
    duration = min(48 * HOUR_S, max(30.0, rng.lognormvariate(math.log(30 * 60), 1.5)))
    gpus = rng.choices((1, 2, 4, 8), weights=(60, 15, 15, 10))[0]
    return TraceJob(
        job_id=job_id, submit_s=rng.uniform(0, WEEK_S), duration_s=duration, gpus=gpus,
        account=account,
    )  # fmt: skip


def synthetic_jobs(seed: int, count: int) -> list[TraceJob]:
    """``count`` jobs of the mix above (counts rounded; at least one of each kind)."""
    rng = random.Random(seed)
    gangs, nonresumables, ordinaries = rng.randint(1, 2), rng.randint(1, 2), rng.randint(2, 3)
    kinds = [
        ("syn/short", _short, max(1, round(count * SHORT_SHARE))),
        *[(f"syn/gang-{k + 1}", _gang, max(1, round(count * GANG_SHARE / gangs)))
          for k in range(gangs)],
        *[(f"syn/nonresumable-{k + 1}", _nonresumable,
           max(1, round(count * NONRESUMABLE_SHARE / nonresumables)))
          for k in range(nonresumables)],
    ]  # fmt: skip
    left = max(ordinaries, count - sum(n for _, _, n in kinds))
    kinds += [
        (f"syn/ordinary-{k + 1}", _ordinary, left // ordinaries + (k < left % ordinaries))
        for k in range(ordinaries)
    ]
    jobs: list[TraceJob] = []
    for account, draw, n in kinds:
        jobs += [draw(rng, f"syn{seed}-{len(jobs) + i:05d}", account) for i in range(n)]
    return jobs
