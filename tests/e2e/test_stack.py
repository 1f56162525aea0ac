"""The whole stack as separate processes over a real NATS server, driven like a user would."""

import json
import sys
from pathlib import Path

from allot.client import AsyncClient
from allot.client.stack import Stack, read_cluster
from allot.core import DEFAULT_POLICY, JobStatus, State, apply_record, plan, policy_hash
from allot.proto.events import JobSpec, PlanComputed
from tests.stack import cli, gone, python, running, until

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "accounts.toml"


async def test_a_job_runs_and_its_events_are_in_order(client: AsyncClient, tmp_path: Path) -> None:
    out = tmp_path / "result.txt"
    code = (
        "import os; open(os.environ['OUT'], 'w')"
        ".write(os.environ['CUDA_VISIBLE_DEVICES'] + ' ' + os.environ['ALLOT_JOB_ID'])"
    )
    reply = await client.submit(
        JobSpec(account="lab/alice", gpus=2, command=python(code), env={"OUT": str(out)})
    )
    assert reply.job_id is not None
    job = await client.wait(reply.job_id, timeout=20)

    assert job.status == JobStatus.SUCCEEDED
    assert job.exit_code == 0
    [gpus] = job.placements.values()
    assert out.read_text() == f"{','.join(map(str, gpus))} {job.job_id}"
    assert len(gpus) == 2
    trail = [
        r.type
        for r in await client.events.read()
        if (r.type in {"JobSubmitted", "JobStarted", "JobExited"} and reply.job_id in r.subject)
        or (
            r.type == "PlanComputed"
            and r.event is not None
            and any(a.job_id == reply.job_id for a in r.event.admissions)
        )  # type: ignore[attr-defined]
    ]
    assert trail == ["JobSubmitted", "PlanComputed", "JobStarted", "JobExited"]


async def test_every_plan_names_the_prefix_it_was_computed_from(client: AsyncClient) -> None:
    for gpus in (1, 2, 4, 4):
        await client.submit(
            JobSpec(account="lab/bob", gpus=gpus, command=python("import time; time.sleep(0.5)"))
        )
    await until(client, lambda s: sum(j.status.terminal for j in s.jobs.values()) == 4, timeout=30)
    plans = [r for r in await client.events.read() if r.type == "PlanComputed"]
    assert plans
    previous = 0
    for record in plans:
        # Computed from a prefix that already held the plan before it: plans never overlap.
        basis = record.event.basis_seq  # type: ignore[union-attr]
        assert previous <= basis < record.seq
        previous = record.seq


async def test_cancel_stops_a_running_job(client: AsyncClient) -> None:
    reply = await client.submit(
        JobSpec(account="lab/a", gpus=1, command=python("import time; time.sleep(60)"))
    )
    assert reply.job_id is not None
    job_id = reply.job_id
    await until(client, lambda s: running(s, job_id))
    await client.cancel(job_id)
    job = await client.wait(job_id, timeout=15)
    assert job.status == JobStatus.CANCELLED
    assert job.exit_code == -15  # SIGTERM reached the job itself


def test_the_cli_submits_waits_and_shows_status(stack: Stack) -> None:

    submit = ["submit", "--gpus", "1", "--account", "demo", "--wait"]
    done = cli(stack, *submit, "--", sys.executable, "-c", "print(42)")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "42"
    job_id = done.stderr.split()[0]

    failing = cli(stack, *submit, "--quiet", "--", sys.executable, "-c", "raise SystemExit(3)")
    assert failing.returncode == 3

    status = cli(stack, "status", job_id, "--json")
    assert status.returncode == 0
    assert '"status": "succeeded"' in status.stdout

    bad = cli(stack, "submit", "--gpus", "0", "--account", "demo", "--", "true")
    assert bad.returncode == 2
    assert "gpus='0'" in bad.stderr
    assert "from 1 up to 1024" in bad.stderr

    tail = cli(stack, "log", "tail", "-n", "50")
    assert "JobExited" in tail.stdout
    assert "PlanComputed" in tail.stdout
    assert job_id in cli(stack, "status").stdout
    assert "node-1" in cli(stack, "nodes").stdout


async def test_a_job_that_cannot_start_fails_and_frees_its_gpus(client: AsyncClient) -> None:
    broken = await client.submit(
        JobSpec(account="lab/a", gpus=4, command=python("pass"), workdir="/nonexistent/dir")
    )
    assert broken.job_id is not None
    job = await client.wait(broken.job_id, timeout=15)
    assert job.status == JobStatus.FAILED
    assert job.exit_code is None
    assert "could not start" in job.end_reason
    # Its GPUs are free again: a job needing the whole node runs.
    after = await client.submit(JobSpec(account="lab/a", gpus=4, command=python("pass")))
    assert after.job_id is not None
    assert (await client.wait(after.job_id, timeout=15)).status == JobStatus.SUCCEEDED


async def test_processes_a_job_leaves_behind_end_with_it(
    client: AsyncClient, tmp_path: Path
) -> None:
    pid_file = tmp_path / "child.pid"
    code = (
        "import subprocess, sys\n"
        "child = subprocess.Popen(['sleep', '60'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
    )
    reply = await client.submit(JobSpec(account="lab/a", gpus=1, command=python(code)))
    assert reply.job_id is not None
    job = await client.wait(reply.job_id, timeout=15)
    assert job.status == JobStatus.SUCCEEDED
    await gone(int(pid_file.read_text()))


async def test_every_recorded_plan_is_recomputed_from_its_basis(client: AsyncClient) -> None:
    for gpus in (4, 2, 2, 1, 4):
        await client.submit(
            JobSpec(account="lab/c", gpus=gpus, command=python("import time; time.sleep(0.2)"))
        )
    await until(
        client, lambda s: len(s.jobs) == 5 and all(j.status.terminal for j in s.jobs.values())
    )
    records = await client.events.read()
    plans = [r for r in records if isinstance(r.event, PlanComputed)]
    assert len(plans) >= 2
    for record in plans:
        recorded = record.event
        assert isinstance(recorded, PlanComputed)
        state = State()
        for earlier in records[: recorded.basis_seq]:
            apply_record(state, earlier)
        assert state.seq == recorded.basis_seq
        again = plan(state, recorded.now, DEFAULT_POLICY)
        assert recorded.policy_hash == policy_hash(DEFAULT_POLICY)
        assert again.admissions == recorded.admissions
        assert again.pending == recorded.pending
        assert again.ranks == recorded.ranks


def test_the_cli_applies_and_shows_the_account_tree(stack: Stack, tmp_path: Path) -> None:

    applied = cli(stack, "accounts", "apply", str(EXAMPLE))
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout.strip() == "defined 6, updated 0, removed 0"
    shown = cli(stack, "accounts", "show")
    assert "lab/vision/alice" in shown.stdout
    assert "gpu 8" in shown.stdout

    broken = tmp_path / "broken.toml"
    broken.write_text('[accounts."lab"]\nweight = "heavy"\n[accounts."x/y"]\n')
    refused = cli(stack, "accounts", "apply", str(broken))
    assert refused.returncode == 2
    assert "nothing changed" in refused.stderr
    assert "accounts.lab.weight" in refused.stderr
    assert "parent 'x' is not declared" in refused.stderr
    assert "lab/vision/alice" in cli(stack, "accounts", "show").stdout  # the tree is as it was

    # With a tree in place, jobs must name one of its accounts.
    unknown = cli(stack, "submit", "--gpus", "1", "--account", "nobody", "--", "true")
    assert unknown.returncode == 2
    assert "no such account" in unknown.stderr
    known = cli(stack, "submit", "--gpus", "1", "--account", "lab/nlp/bob", "--wait", "--", "true")
    assert known.returncode == 0, known.stderr


async def test_the_ledger_charges_a_finished_job_to_its_account_and_ancestors(
    client: AsyncClient,
) -> None:
    reply = await client.submit(
        JobSpec(account="lab/vision/alice", gpus=2, command=python("import time; time.sleep(1)"))
    )
    assert reply.job_id is not None
    job = await client.wait(reply.job_id, timeout=20)
    assert job.started_at is not None
    assert job.ended_at is not None
    state = await until(client, lambda s: not s.unbilled and "lab" in s.usage)
    expected = 2 * ((job.ended_at - job.started_at) // 1_000_000)
    for account in ("lab/vision/alice", "lab/vision", "lab"):
        assert state.usage[account].total_gpu_ms == expected
    assert 2000 <= expected < 20_000  # a 1 s job on 2 GPUs, with start and stop overhead


async def test_budgets_fund_jobs_that_declare_a_minimum_runtime(
    stack: Stack, client: AsyncClient
) -> None:
    assert cli(stack, "accounts", "apply", str(EXAMPLE)).returncode == 0
    granted = cli(stack, "budget", "grant", "lab/vision", "--gpu-hours", "10", "--period", "7d")
    assert granted.returncode == 0, granted.stderr
    assert "10 GPU-hours per 7d" in granted.stdout
    refused = cli(stack, "budget", "grant", "lab/vision", "--share", "2")
    assert refused.returncode == 2
    assert "share='2.0'" in refused.stderr

    submit = ["submit", "--gpus", "1", "--wait", "--quiet"]
    contract = cli(
        stack, *submit, "--account", "lab/vision/alice", "--min-runtime", "10m", "--", "true"
    )
    no_contract = cli(stack, *submit, "--account", "lab/vision/alice", "--", "true")
    no_budget = cli(
        stack, *submit, "--account", "lab/nlp/bob", "--min-runtime", "10m", "--", "true"
    )
    too_long = cli(stack, *submit, "--account", "lab/nlp/bob", "--min-runtime", "9h", "--", "true")
    assert too_long.returncode == 2
    assert "up to 8h" in too_long.stderr
    job_ids = [p.stderr.split()[0] for p in (contract, no_contract, no_budget)]
    admitted = {
        a.job_id: a.funded
        for r in await client.events.read()
        if isinstance(r.event, PlanComputed)
        for a in r.event.admissions
    }
    assert [admitted[j] for j in job_ids] == [True, False, False]

    shown = cli(stack, "budget", "show")
    assert shown.returncode == 0
    vision = next(line for line in shown.stdout.splitlines() if line.strip().startswith("vision"))
    assert vision.split()[-1] == "10.00"  # budget left: these jobs ran for milliseconds

    report = cli(stack, "budget", "report", "--window", "1h", "--json")
    assert report.returncode == 0, report.stderr
    rows = {row["account"]: row for row in json.loads(report.stdout)}
    alice = rows["lab/vision/alice"]
    assert alice["delivered_gpu_ms"] > 0
    assert alice["owed_gpu_ms"] > 0  # it wanted GPUs while they were there
    assert rows["lab"]["delivered_gpu_ms"] >= alice["delivered_gpu_ms"]
    assert "DELIVERED/OWED" in cli(stack, "budget", "report").stdout


async def test_queue_and_explain_show_order_reasons_and_placement(
    stack: Stack, client: AsyncClient
) -> None:
    def submit(*args: str) -> str:
        done = cli(stack, "submit", "--gpus", "4", "--account", "lab/a", *args, "--", "sleep", "60")
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    # Interactive itself, so the interactive job below has no grounds to preempt it.
    running_job = submit("--max-runtime", "1h", "--tier", "interactive")
    await until(client, lambda s: s.jobs.get(running_job) is not None and running(s, running_job))
    batch = submit("--name", "later-batch")
    interactive = submit("--tier", "interactive", "--name", "notebook")
    await until(
        client,
        lambda s: all(
            s.jobs.get(j) is not None and s.jobs[j].reason is not None for j in (batch, interactive)
        ),
    )
    rows = json.loads(cli(stack, "queue", "--json").stdout)["rows"]
    assert [(r["job_id"], r["tier"], r["reason_text"]) for r in rows] == [
        (interactive, "interactive", "NO_FIT(need 4); free 2"),
        (batch, "batch", "NO_FIT(need 4); free 2"),
    ]
    # The head job is promised node-1 once the running job's declared hour is over.
    state = await client.state()
    assert rows[0]["estimated_start"] == state.jobs[running_job].started_at + 3600 * 10**9
    assert rows[1]["estimated_start"] is None
    waiting = json.loads(cli(stack, "explain", batch, "--json").stdout)
    assert (waiting["position"], waiting["queue_length"], waiting["reason"]) == (
        2,
        2,
        "NO_FIT(need 4); free 2",
    )
    assert "estimated start" in cli(stack, "explain", interactive).stdout
    placed = cli(stack, "explain", running_job)
    assert "admitted to node-1[0,1,2,3], unfunded" in placed.stdout
    assert cli(stack, "explain", "j-nope").returncode == 1


async def test_nodes_register_their_topology(tmp_path: Path) -> None:
    nodes = read_cluster(Path(__file__).resolve().parents[2] / "examples" / "cluster.toml")
    async with (
        Stack(tmp_path / "allot", nodes, restart=False) as s,
        await s.client() as client,
    ):
        state = await client.state()
        a100 = state.nodes["a100-1"]
        assert a100.nvlink_islands == [[0, 1, 2, 3], [4, 5, 6, 7]]
        assert a100.labels == {"block": "b1", "rack": "r1"}
        assert a100.gpus[0].model == "SIM-A100"
        assert state.nodes["h100-1"].nvlink_islands == [list(range(8))]
        shown = cli(s, "nodes").stdout
        assert "0-3 4-7" in shown
        assert "block=b1,rack=r1" in shown
