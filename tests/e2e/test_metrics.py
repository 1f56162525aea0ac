"""The metrics endpoint of a running stack, scraped and parsed as Prometheus does, holds the
values the simulator's own metric functions give for the history in the log; an exporter
started again reports the same."""

import asyncio
import json
import re
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from allot.client import CommandError
from allot.client.stack import NodeShape, Stack
from allot.proto.events import JobExited, JobSpec, JobStarted, JobSubmitted
from allot.sim.metrics import JobOutcome, compute, wait_percentiles, wait_s
from tests.stack import python, until

S = 1e9
ROOT = Path(__file__).resolve().parents[2]
# (account, GPUs, seconds): two accounts share four GPUs, so some jobs wait.
JOBS = [("lab/a", 4, 0.6), ("lab/b", 2, 0.4), ("lab/a", 2, 0.3), ("lab/b", 4, 0.2)]


def exposition(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return str(response.read().decode())


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the exposition, by name and labels."""
    text = exposition(url)
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def outcomes_in(records: list) -> list[JobOutcome]:  # type: ignore[type-arg]
    """Each job's outcome, read straight off its events (no job here is preempted)."""
    jobs: dict[str, JobOutcome] = {}
    for record in records:
        event = record.event
        if isinstance(event, JobSubmitted):
            jobs[event.job_id] = JobOutcome(
                job_id=event.job_id, account=event.spec.account, tier=event.spec.tier,
                gpus=event.spec.gpus, submit_s=event.meta.at / S,
            )  # fmt: skip
        elif isinstance(event, JobStarted):
            jobs[event.job_id].first_start_s = event.meta.at / S
        elif isinstance(event, JobExited):
            job = jobs[event.job_id]
            assert job.first_start_s is not None
            job.runs, job.end_s = [(job.first_start_s, event.meta.at / S)], event.meta.at / S
    return list(jobs.values())


async def test_the_metrics_endpoint_says_what_the_log_says(tmp_path: Path) -> None:
    stack = Stack(
        tmp_path / "allot", [NodeShape(node_id="node-1", gpus=4)], restart=False, metrics_port=0
    )
    async with stack, await stack.client() as client:
        await client.apply_accounts({"lab": {}, "lab/a": {}, "lab/b": {}})
        ids = [
            (await client.submit(JobSpec(account=account, gpus=gpus,
                                         command=python(f"import time; time.sleep({seconds})")))
             ).job_id
            for account, gpus, seconds in JOBS
        ]  # fmt: skip
        state = await until(
            client, lambda s: all(j in s.jobs and s.jobs[j].status.terminal for j in ids), 30
        )
        last = await client.events.last_seq()
        assert stack.metrics_url is not None

        async def scraped() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
            async with asyncio.timeout(15):  # until the exporter has folded all of it
                while True:
                    with_log = await asyncio.to_thread(_try_scrape, stack.metrics_url)
                    if with_log.get(("allot_log_folded_sequence", ()), 0) >= last:
                        return with_log
                    await asyncio.sleep(0.2)

        with pytest.raises(CommandError):
            await client.cancel("j-nosuchjob")  # refused: counted by the intake
        requests = ("allot_command_requests_total", "admin.submit", "accepted")

        async def counted(value: float) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
            async with asyncio.timeout(20):  # the services send their counts every 5 s
                while True:
                    got = await asyncio.to_thread(_try_scrape, stack.metrics_url)
                    if counts(got, *requests) == value and counts(
                        got, "allot_command_requests_total", "admin.cancel", "refused"
                    ):
                        return got
                    await asyncio.sleep(0.5)

        metrics = await counted(len(JOBS))
        folded = int(metrics[("allot_log_folded_sequence", ())])
        records = await client.events.read(1, folded)  # what the exporter had folded
        last = folded
        # Restarted, the exporter folds the same log to the same values.
        metrics_child = stack.children["metrics"]
        assert metrics_child.process is not None
        metrics_child.process.terminate()
        await metrics_child.process.wait()
        await stack._spawn(metrics_child)
        again = await scraped()
        stack_metrics_text = await asyncio.to_thread(exposition, stack.metrics_url)

    outcomes = outcomes_in(records)
    end = max(o.end_s or 0 for o in outcomes)
    expected = compute("live", outcomes, 4, end, {"lab/a": 0.5, "lab/b": 0.5})
    assert metrics[("allot_occupancy_ratio", ())] == expected["occupancy"]
    assert 0 < expected["occupancy"] <= 1
    for account in ("lab/a", "lab/b"):
        waits = [wait_s(o, end) for o in outcomes if o.account == account]
        for key, value in wait_percentiles(waits).items():
            quantile = str(int(key[len("wait_p") : -len("_s")]) / 100)
            labels = (("account", account), ("quantile", quantile), ("tier", "batch"))
            assert metrics[("allot_queue_wait_seconds", labels)] == value, (account, key)
        ran = sum(o.gpus * (o.runs[0][1] - o.runs[0][0]) for o in outcomes if o.account == account)
        assert (
            abs(metrics[("allot_account_gpu_seconds_total", (("account", account),))] - ran) < 1e-6
        )
    assert metrics[("allot_jobs", (("state", "succeeded"),))] == len(JOBS)
    assert metrics[("allot_admission_latency_seconds_count", ())] == len(JOBS)
    assert metrics[("allot_gpus", (("state", "free"),))] == 4
    assert metrics[("allot_node_up", (("node", "node-1"),))] == 1
    assert len(state.jobs) == len(JOBS)
    # What the services count outside the log: the planner's cycles, the intake's requests.
    assert metrics[("allot_plan_cycles_total", (("decided", "true"),))] >= 2
    assert metrics[("allot_plan_cycle_seconds_count", ())] >= 2
    refused = (("command", "admin.cancel"), ("field", "job_id"), ("service", "intake"))
    assert metrics[("allot_command_refusals_total", refused)] == 1
    # Every series the shipped dashboard plots is one the endpoint serves.
    dashboard = json.loads((ROOT / "deploy/grafana/dashboards/allot.json").read_text())
    plotted = {
        name
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in re.findall(r"allot_[a-z_]+", target["expr"])
    }
    assert plotted <= served(stack_metrics_text), plotted - served(stack_metrics_text)
    sequence = ("allot_log_folded_sequence", ())
    # (What services count goes on growing, and comes to a new exporter with their next send.)
    assert from_log({**again, sequence: 0}) == from_log({**metrics, sequence: 0})


def served(exposition: str) -> set[str]:
    """The names of the series an exposition declares, samples or not."""
    names = set()
    for line in exposition.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            suffixes = ("_bucket", "_count", "_sum") if kind == "histogram" else ("",)
            names |= {name + suffix for suffix in suffixes}
    return names


def from_log(
    metrics: dict[tuple[str, tuple[tuple[str, str], ...]], float],
) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The values folded from the log: not what services count, nor the GPUs' load, which
    comes to a new exporter with a node's next samples."""
    counted = ("allot_plan_cycle", "allot_plan_conflicts", "allot_command_", "allot_heartbeats_")
    sampled = ("allot_gpu_utilization", "allot_gpu_memory", "allot_gpu_temp", "allot_gpu_power")
    outside = (*counted, *sampled)
    return {key: value for key, value in metrics.items() if not key[0].startswith(outside)}


def counts(
    metrics: dict[tuple[str, tuple[tuple[str, str], ...]], float],
    name: str,
    command: str,
    outcome: str,
) -> float:
    labels = (("command", command), ("outcome", outcome), ("service", "intake"))
    return metrics.get((name, labels), 0.0)


def _try_scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    try:
        return scrape(url)
    except OSError:  # not listening yet
        return {}
