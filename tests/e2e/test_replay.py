"""Every decision, proven from the log: verify, tamper, export and import, time travel."""

import asyncio
import gzip
import json
import random
from pathlib import Path

from allot.bus import EmbeddedNats, EventLog
from allot.client import AsyncClient
from allot.client.stack import Stack
from allot.core import JobStatus
from allot.proto.events import JobSpec, PlanComputed
from tests.stack import cli, python, until

S = 10**9


async def busy_history(stack: Stack, client: AsyncClient) -> list[str]:
    """Random submissions and cancellations, a preemption and a lost node."""
    rng = random.Random(7)
    jobs = []
    for n in range(14):
        spec = JobSpec(
            account=rng.choice(["lab/a", "lab/b", "ops/c"]),
            gpus=rng.choice([1, 1, 2]),
            workers=rng.choice([1, 1, 1, 2]),
            tier=rng.choice(["batch", "batch", "best-effort"]),
            resumable=True,
            max_runtime_ns=rng.choice([None, 60 * S]),
            command=python(f"import time; time.sleep({rng.choice([0.2, 0.5, 1.5])})"),
            name=f"job-{n}",
        )
        reply = await client.submit(spec)
        assert reply.job_id is not None
        jobs.append(reply.job_id)
        if n % 5 == 4:
            await client.cancel(jobs[n - 1])
        await asyncio.sleep(rng.choice([0, 0.05, 0.2]))
    notebook = await client.submit(
        JobSpec(account="lab/nb", gpus=4, tier="interactive", command=python("print(1)"))
    )
    assert notebook.job_id is not None
    stack.kill("node-2")  # lost: its jobs are requeued
    await until(client, lambda s: "node-2" in s.nodes and s.nodes["node-2"].lost, timeout=20)
    await stack.revive("node-2")
    everything = [*jobs, notebook.job_id]
    await until(
        client,
        lambda s: all(j in s.jobs and s.jobs[j].status.terminal for j in everything),
        timeout=90,
    )
    return everything


async def test_a_busy_history_verifies_and_a_tampered_export_fails_at_the_tampered_plan(
    stack: Stack, client: AsyncClient, tmp_path: Path
) -> None:
    await busy_history(stack, client)
    verified = cli(stack, "replay", "--verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    records = await client.events.read()
    plans = [r for r in records if isinstance(r.event, PlanComputed)]
    assert f"{len(plans)} plans recomputed: all match" in verified.stdout
    assert sum(len(p.event.preemptions) for p in plans) >= 1  # type: ignore[union-attr]
    assert any(r.type == "NodeLost" for r in records)

    exported = tmp_path / "log.jsonl.gz"
    done = cli(stack, "log", "export", str(exported))
    assert done.returncode == 0, done.stderr
    offline = cli(stack, "replay", "--verify", "--log", str(exported))
    assert offline.returncode == 0, offline.stdout + offline.stderr

    # Change where one recorded admission put its job: replay must fail there, and only there.
    with gzip.open(exported, "rt") as text:
        lines = text.read().splitlines()
    target = next(
        n for n, line in enumerate(lines) if '"admissions":[{' in line and "PlanComputed" in line
    )
    record = json.loads(lines[target])
    admission = record["event"]["admissions"][0]
    placement = admission["placements"][0]
    placement["gpus"] = [g + 100 for g in placement["gpus"]]
    lines[target] = json.dumps(record)
    tampered = tmp_path / "tampered.jsonl"
    tampered.write_text("\n".join(lines) + "\n")
    failed = cli(stack, "replay", "--verify", "--log", str(tampered))
    assert failed.returncode == 1
    assert f"DIVERGES at sequence {record['seq']} (jobs: {admission['job_id']})" in failed.stdout
    assert failed.stdout.count("DIVERGES") == 1


async def test_an_exported_log_imports_into_an_empty_stream_with_the_same_sequences(
    stack: Stack, client: AsyncClient, tmp_path: Path
) -> None:
    reply = await client.submit(JobSpec(account="lab/a", gpus=2, command=python("print(2)")))
    assert reply.job_id is not None
    assert (await client.wait(reply.job_id, timeout=20)).status == JobStatus.SUCCEEDED
    exported = tmp_path / "log.jsonl"
    assert cli(stack, "log", "export", str(exported)).returncode == 0
    original = await client.events.read()

    async with EmbeddedNats(tmp_path / "elsewhere") as other:
        imported = cli(other.url, "log", "import", str(exported))
        assert imported.returncode == 0, imported.stderr
        log = await EventLog.connect(other.url)
        try:
            copy = await log.read()
        finally:
            await log.close()
        assert [(r.seq, r.subject, r.data) for r in copy] == [
            (r.seq, r.subject, r.data) for r in original
        ]
        verified = cli(other.url, "replay", "--verify")
        assert verified.returncode == 0, verified.stdout + verified.stderr
        again = cli(other.url, "log", "import", str(exported))
        assert again.returncode == 2
        assert "the stream is not empty" in again.stderr

        # Time travel: at the sequence of the job's start, it is running.
        started = next(r.seq for r in copy if r.type == "JobStarted")
        then = json.loads(cli(other.url, "replay", "--at", str(started), "--json").stdout)
        assert then["seq"] == started
        assert [(j["job_id"], j["status"]) for j in then["jobs"]] == [(reply.job_id, "running")]
        assert cli(other.url, "replay", "--at", "yesterday").returncode != 0


def test_a_log_with_a_gap_is_refused_whole(tmp_path: Path) -> None:
    lines = [
        json.dumps({"seq": 1, "subject": "allot.evt.plan.X", "event": {}}),
        json.dumps({"seq": 3, "subject": "allot.evt.plan.X", "event": {}}),
    ]
    (tmp_path / "gap.jsonl").write_text("\n".join(lines) + "\n")
    done = cli("nats://127.0.0.1:1", "replay", "--verify", "--log", str(tmp_path / "gap.jsonl"))
    assert done.returncode == 0  # verify reads any log; import is what needs it whole
    (tmp_path / "bad.jsonl").write_text("not json\n")
    bad = cli("nats://127.0.0.1:1", "replay", "--verify", "--log", str(tmp_path / "bad.jsonl"))
    assert bad.returncode == 2
    assert "bad.jsonl:1: not a log line" in bad.stderr
