"""Each metric on a tiny run computed by hand."""

import pytest

from allot.sim.metrics import JobOutcome, compute, percentile

H = 3600.0


def test_two_accounts_one_gpu_one_hour_each() -> None:
    # One GPU. a's job runs the first hour; b's, submitted at the same time, the second.
    outcomes = [
        JobOutcome(job_id="A", account="a", tier="batch", gpus=1, submit_s=0, first_start_s=0,
                   end_s=H, runs=[(0, H)]),
        JobOutcome(job_id="B", account="b", tier="interactive", gpus=1, submit_s=0,
                   first_start_s=H, end_s=2 * H, runs=[(H, 2 * H)]),
    ]  # fmt: skip
    m = compute("test", outcomes, gpus=1, end_s=2 * H)
    # Hour 0: both want the GPU, each is owed half; hour 1: only b wants it.
    assert m["per_account"]["a"]["owed_gpu_hours"] == pytest.approx(0.5)
    assert m["per_account"]["b"]["owed_gpu_hours"] == pytest.approx(1.5)
    assert m["per_account"]["a"]["owed_delivered"] == pytest.approx(2.0)
    assert m["owed_delivered_min_account"] == pytest.approx(1 / 1.5)
    assert m["owed_delivered_overall"] == pytest.approx(1.0)
    assert m["jain_owed_delivered"] == pytest.approx((2 + 2 / 3) ** 2 / (2 * (4 + 4 / 9)))
    assert m["occupancy"] == pytest.approx(1.0)  # the GPU was busy whenever B waited
    assert (m["wait_p50_s"], m["wait_p90_s"]) == (0, H)
    assert m["debug_wait_p90_s"] == H  # B is the interactive one
    assert m["max_wait_least_served_s"] == H  # b is the worst served
    assert m["mean_jct_s"] == pytest.approx(1.5 * H)
    assert m["makespan_s"] == 2 * H
    assert (m["preemptions_per_hour"], m["lost_gpu_hours_per_preemption"]) == (0, 0)


def test_occupancy_counts_only_while_something_waits() -> None:
    # Two GPUs: a 1-GPU job runs 0-100 while a 2-GPU job waits for the whole cluster.
    outcomes = [
        JobOutcome(job_id="small", account="a", tier="batch", gpus=1, submit_s=0,
                   first_start_s=0, end_s=100, runs=[(0, 100)]),
        JobOutcome(job_id="wide", account="a", tier="batch", gpus=2, submit_s=0,
                   first_start_s=100, end_s=200, runs=[(100, 200)]),
    ]  # fmt: skip
    assert compute("t", outcomes, gpus=2, end_s=200)["occupancy"] == pytest.approx(0.5)


def test_preemptions_lost_work_and_unfinished_jobs() -> None:
    outcomes = [
        JobOutcome(job_id="p", account="a", tier="batch", gpus=2, submit_s=0, first_start_s=0,
                   end_s=2 * H, runs=[(0, H / 2), (H, 2 * H)], preemptions=2, lost_gpu_s=H),
        JobOutcome(job_id="never", account="a", tier="batch", gpus=1, submit_s=H),
    ]  # fmt: skip
    m = compute("t", outcomes, gpus=2, end_s=2 * H)
    assert m["preemptions_per_hour"] == pytest.approx(1.0)  # 2 in 2 hours
    assert m["lost_gpu_hours_per_preemption"] == pytest.approx(0.5)
    assert m["wait_p99_s"] == H  # "never" waited from its submission to the end
    assert m["mean_jct_s"] == 2 * H  # over finished jobs only
    # p waited between its runs (H/2..H) while nothing ran: occupancy 0 then, 1 after.
    assert 0 < m["occupancy"] < 1


def test_percentiles_are_nearest_rank() -> None:
    assert percentile([5, 1, 3, 2, 4], 50) == 3
    assert percentile([5, 1, 3, 2, 4], 90) == 5
    assert percentile([], 90) == 0


def test_gpus_of_a_node_that_is_down_are_neither_available_nor_owed() -> None:
    # Two GPUs, one of them down for the first 100 s: the 1-GPU job running then used
    # every GPU there was while the other waited.
    outcomes = [
        JobOutcome(job_id="A", account="a", tier="batch", gpus=1, submit_s=0, first_start_s=0,
                   end_s=100, runs=[(0, 100)]),
        JobOutcome(job_id="B", account="a", tier="batch", gpus=2, submit_s=0,
                   first_start_s=100, end_s=200, runs=[(100, 200)]),
    ]  # fmt: skip
    assert compute("t", outcomes, gpus=2, end_s=200, down=[(0, 100, 1)])["occupancy"] == 1.0
    assert compute("t", outcomes, gpus=2, end_s=200)["occupancy"] == pytest.approx(0.5)
    # One GPU, down the first half hour: the job wanting it all hour was owed only the
    # half hour there was, and got it.
    wants = [
        JobOutcome(job_id="C", account="c", tier="batch", gpus=1, submit_s=0,
                   first_start_s=H / 2, end_s=H, runs=[(H / 2, H)]),
    ]  # fmt: skip
    m = compute("t", wants, gpus=1, end_s=H, down=[(0, H / 2, 1)])
    assert m["per_account"]["c"]["owed_gpu_hours"] == pytest.approx(0.5)
    assert m["owed_delivered_min_account"] == pytest.approx(1.0)
    assert compute("t", wants, gpus=1, end_s=H)["owed_delivered_min_account"] == pytest.approx(0.5)


def test_the_last_hour_owes_only_the_part_of_it_the_run_lasted() -> None:
    # One GPU, up for the first hour only; the run ends half an hour later with the second
    # job still waiting. Nothing was there to owe it after the first hour.
    outcomes = [
        JobOutcome(job_id="A", account="a", tier="batch", gpus=1, submit_s=0, first_start_s=0,
                   end_s=H, runs=[(0, H)]),
        JobOutcome(job_id="B", account="a", tier="batch", gpus=1, submit_s=H),
    ]  # fmt: skip
    m = compute("t", outcomes, gpus=1, end_s=1.5 * H, down=[(H, 1.5 * H, 1)])
    assert m["per_account"]["a"]["owed_gpu_hours"] == pytest.approx(1.0)
    assert m["owed_delivered_min_account"] == pytest.approx(1.0)


def test_wait_percentiles_over_twenty_jobs_by_nearest_rank() -> None:
    # Job k (1..20) waits k seconds, then runs a second, one GPU each on twenty GPUs.
    outcomes = [
        JobOutcome(job_id=f"j{k}", account="a", tier="batch", gpus=1, submit_s=0,
                   first_start_s=k, end_s=k + 1, runs=[(k, k + 1)])
        for k in range(1, 21)
    ]  # fmt: skip
    m = compute("t", outcomes, gpus=20, end_s=21)
    assert [m[f"wait_p{q}_s"] for q in (50, 90, 95, 99)] == [10, 18, 19, 20]
    assert m["per_account"]["a"]["wait_p95_s"] == 19
