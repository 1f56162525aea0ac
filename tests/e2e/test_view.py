"""The read model as readers meet it: the CLI asks it, it answers from one fold of the log,
in the planner's recorded order, and no question can stop it."""

import json
from pathlib import Path

import msgspec

from allot.client.stack import NodeShape, Stack
from allot.core import DEFAULT_POLICY, JobStatus, State, queue
from allot.core.replay import adopted_policy
from allot.proto.events import JobSpec, PlanComputed
from allot.proto.queries import JOBS, QUEUE
from allot.proto.subjects import command
from tests.stack import cli, python, running, status, until


def waiting(state: State, *job_ids: str) -> bool:
    return all(j in state.jobs and state.jobs[j].reason is not None for j in job_ids)


async def test_allot_queue_is_the_planners_order_under_its_own_settings(tmp_path: Path) -> None:
    nodes = [NodeShape(node_id="node-1", gpus=2)]
    async with (
        Stack(tmp_path / "allot", nodes, restart=False, planner_args=("--order", "fifo")) as stack,
        await stack.client() as client,
    ):
        holder = await client.submit(
            JobSpec(account="m-team", gpus=2, command=python("import time; time.sleep(60)"))
        )
        assert holder.job_id is not None
        await until(client, lambda s: running(s, str(holder.job_id)))
        # The default policy would put the batch job before the best-effort one.
        first = await client.submit(
            JobSpec(account="z-team", gpus=2, command=["true"], tier="best-effort")
        )
        second = await client.submit(JobSpec(account="a-team", gpus=2, command=["true"]))
        state = await until(client, lambda s: waiting(s, str(first.job_id), str(second.job_id)))

        shown = json.loads(cli(stack, "queue", "--json").stdout)
        order = [row["job_id"] for row in shown["rows"]]
        assert order == [first.job_id, second.job_id]
        # The order the planner itself uses: its recorded policy, as replay finds it.
        [plan] = [r.event for r in await client.events.read() if isinstance(r.event, PlanComputed)][
            -1:
        ]
        recorded = adopted_policy(state.policies[plan.policy_hash], plan.policy_hash)
        assert recorded is not None
        assert recorded.order == "fifo"
        assert [j.job_id for j in queue(state, plan.now, recorded)] == order
        assert [j.job_id for j in queue(state, plan.now, DEFAULT_POLICY)] != order
        assert shown["policy_hash"] == plan.policy_hash
        text = cli(stack, "queue")
        assert f"policy allot ({plan.policy_hash})" in text.stderr

        # When the GPUs come free, the planner admits the head of that queue.
        await client.cancel(str(holder.job_id))
        admitted = await until(
            client, lambda s: status(s, str(first.job_id)) not in (None, JobStatus.PENDING)
        )
        assert admitted.jobs[str(second.job_id)].status == JobStatus.PENDING


async def test_status_filters_pages_and_columns(stack: Stack) -> None:
    async with await stack.client() as client:
        ids = []
        for account in ("lab/a", "lab/b", "lab/a"):
            reply = await client.submit(JobSpec(account=account, gpus=1, command=["true"]))
            ids.append(str(reply.job_id))
        # Read your writes: the answer is at least as new as the log when asked.
        just = await client.submit(JobSpec(account="lab/b", gpus=1, command=["sleep", "30"]))
        done = cli(stack, "status", str(just.job_id), "--json")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["job_id"] == just.job_id

    newest = json.loads(cli(stack, "status", "--json", "--limit", "2").stdout)
    assert [j["job_id"] for j in newest] == [just.job_id, ids[2]]
    shown = cli(stack, "status", "--limit", "2")
    assert "newest 2 shown" in shown.stderr
    everyone = json.loads(cli(stack, "status", "--json", "--all").stdout)
    assert [j["job_id"] for j in everyone] == [just.job_id, *reversed(ids)]
    of_a = json.loads(cli(stack, "status", "--json", "--account", "lab/a").stdout)
    assert [j["job_id"] for j in of_a] == [ids[2], ids[0]]
    columns = cli(stack, "status", "-o", "job,account,user")
    assert columns.stdout.splitlines()[0].split() == ["JOB", "ACCOUNT", "USER"]
    wrong = cli(stack, "status", "-o", "job,colour")
    assert wrong.returncode == 2
    assert "'colour'" in wrong.stderr
    assert "Traceback" not in wrong.stderr
    bad = cli(stack, "status", "--account", "Not An Account")
    assert bad.returncode == 2
    assert "accounts[0]" in bad.stderr


async def test_hostile_questions_are_answered_with_the_field_and_change_nothing(
    stack: Stack,
) -> None:
    async with await stack.client() as client:
        before = await client.events.last_seq()
        nc = client.events.nc

        async def ask(name: str, payload: bytes) -> dict[str, object]:
            msg = await nc.request(command(client.principal, name), payload, timeout=10)
            answer: dict[str, object] = msgspec.json.decode(msg.data)
            return answer

        refused = [
            await ask(JOBS, b'{"limit": 0}'),
            await ask(JOBS, b'{"limit": 100000}'),
            await ask(JOBS, b'{"states": ["sleeping"]}'),
            await ask(JOBS, b'{"colour": "blue"}'),
            await ask(JOBS, b"[" * 5000),
            await ask(QUEUE, b'{"offset": -1}'),
            await ask(JOBS, b"\xff\xfe"),
        ]
        fields = [answer["errors"][0]["field"] for answer in refused]  # type: ignore[index]
        assert fields[:4] == ["limit", "limit", "states[0]", "colour"]
        assert fields[5] == "offset"
        # Still answering, and the log is as it was.
        fine = await ask(JOBS, b"{}")
        assert fine["errors"] == []
        assert fine["seq"] == before
        assert await client.events.last_seq() == before
