"""Why GPUs sat idle while jobs waited (``allot.sim.idle``), on runs small enough to work
out by hand."""

import pytest

from allot.core.policies import POLICIES
from allot.proto.events import Placement
from allot.sim.idle import IdleTally
from allot.sim.simulator import Settings, simulate
from allot.sim.trace import TraceJob
from tests import builders as b
from tests.builders import fold

ONE_NODE = Settings(nodes=1, gpus_per_node=8)
HOUR = 3600.0


def job(job_id: str, gpus: int, hours: float, at: float = 0.0, max_hours: float = 24) -> TraceJob:
    return TraceJob(
        job_id=job_id, submit_s=at, duration_s=hours * HOUR, gpus=gpus, account="x",
        tier="batch", max_runtime_s=max_hours * HOUR,
    )  # fmt: skip


def test_gpus_set_aside_for_a_reservation_are_counted_as_reserved() -> None:
    # 4 GPUs run for 10 h; an 8-GPU job waits for them, with the 4 free GPUs set aside;
    # a 4-GPU job that declares 24 h could not end before it starts, so they stay idle:
    # 40 GPU-h of the 88 there were while jobs waited (10 h, then 1 h of the big job).
    jobs = [job("run", 4, 10, max_hours=10), job("big", 8, 1, at=1), job("long", 4, 1, at=2)]
    result = simulate(jobs, ONE_NODE, POLICIES["allot"], "allot")
    assert result["idle_reserved"] == pytest.approx(40 / 88, abs=0.005)
    assert result["idle_too_small"] == result["idle_held"] == result["idle_unplaced"] == 0
    # What occupancy misses is what sat idle.
    assert result["occupancy"] + result["idle_reserved"] == pytest.approx(1.0, abs=0.01)


def test_free_gpus_too_few_for_any_waiting_job_are_counted_as_too_small() -> None:
    # No reservations under fifo: 6 GPUs run 10 h, a 4-GPU job waits; 2 GPUs idle.
    jobs = [job("run", 6, 10), job("waits", 4, 1, at=1)]
    result = simulate(jobs, ONE_NODE, POLICIES["fifo"], "fifo")
    assert result["idle_too_small"] == pytest.approx(0.25, abs=0.01)
    assert result["idle_reserved"] == result["idle_held"] == result["idle_unplaced"] == 0


def test_nothing_is_idle_while_no_job_waits() -> None:
    result = simulate([job("alone", 2, 5)], ONE_NODE, POLICIES["allot"], "allot")
    assert all(result[f"idle_{k}"] == 0 for k in ("held", "reserved", "too_small", "unplaced"))


def test_gpus_kept_for_a_preemptor_count_as_held_only_once_free() -> None:
    # v holds all of n1 and is stopping for p; n2 has 6 GPUs free: those are too few for
    # p, and none of n1's is idle yet.
    state = fold(
        b.node("n1", 8), b.node("n2", 8),
        b.submitted("v", 8, account="x"), b.submitted("s", 2, account="x"),
        b.plan(("v", "n1", list(range(8))), ("s", "n2", [0, 1])),
        b.started("v", "n1", list(range(8))), b.started("s", "n2", [0, 1]),
        b.submitted("p", 8, account="y"),
    )  # fmt: skip
    state.holds["p"] = [Placement(node_id="n1", gpus=list(range(8)))]
    tally = IdleTally()
    tally.observe(state, 0, [])
    tally.observe(state, 10**9, [])
    assert tally.gpu_s == {"held": 0.0, "reserved": 0.0, "too_small": 6.0, "unplaced": 0.0}
