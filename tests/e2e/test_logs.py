"""A job's output, read through its node agents over NATS from wherever the CLI runs."""

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from allot.client import AsyncClient
from allot.client.sending import CommandError
from allot.client.stack import Stack
from allot.core import State
from allot.proto.events import JobSpec
from allot.proto.output import OutputReply
from allot.proto.subjects import HEARTBEATS, output_request
from tests.e2e.test_auth import TREE, as_user
from tests.stack import cli, python, running, until

# Each node's process says which node rank it is, on stdout and on stderr.
SAY_RANK = (
    "import os, sys\n"
    "rank, node = os.environ['ALLOT_NODE_RANK'], os.environ['ALLOT_NODE_ID']\n"
    "print(f'hello from node rank {rank} on {node}', flush=True)\n"
    "print(f'warning from node rank {rank}', file=sys.stderr, flush=True)\n"
)


async def test_each_worker_of_a_gang_has_its_output_read_by_rank(
    stack: Stack, client: AsyncClient
) -> None:
    spec = JobSpec(account="lab/a", workers=3, gpus=2, command=python(SAY_RANK))
    reply = await client.submit(spec)
    assert reply.job_id is not None
    job = await client.wait(reply.job_id, timeout=20)
    # Workers 0 and 1 run in node-1's process, worker 2 in node-2's.
    assert job.placements == {"node-1": [0, 1, 2, 3], "node-2": [0, 1]}

    lead = "hello from node rank 0 on node-1\nwarning from node rank 0\n"
    other = "hello from node rank 1 on node-2\nwarning from node rank 1\n"
    for rank, expected in [(0, lead), (1, lead), (2, other)]:
        shown = cli(stack, "logs", job.job_id, "--rank", str(rank))
        assert (shown.returncode, shown.stdout) == (0, expected), shown.stderr
    assert cli(stack, "logs", job.job_id).stdout == lead  # worker 0 unless asked
    every = cli(stack, "logs", job.job_id, "--all-ranks")
    assert every.stdout.splitlines() == [
        "[0-1] hello from node rank 0 on node-1",
        "[0-1] warning from node rank 0",
        "[2] hello from node rank 1 on node-2",
        "[2] warning from node rank 1",
    ]
    beyond = cli(stack, "logs", job.job_id, "--rank", "3")
    assert beyond.returncode == 1
    assert beyond.stderr == f"allot: {job.job_id} has no worker 3: its workers are 0 to 2\n"


async def test_output_is_bytes_as_the_job_wrote_them(stack: Stack, client: AsyncClient) -> None:
    """Not text: bytes that are no UTF-8, and output larger than one reply carries."""
    code = "import sys; sys.stdout.buffer.write(bytes(range(256)) * 4096 + b'\\xff no newline')"
    reply = await client.submit(JobSpec(account="lab/a", gpus=1, command=python(code)))
    assert reply.job_id is not None
    await client.wait(reply.job_id, timeout=20)
    shown = await asyncio.to_thread(_cli_bytes, stack, "logs", reply.job_id)
    assert shown == bytes(range(256)) * 4096 + b"\xff no newline"
    # A reader that has had enough: no traceback, no error.
    env = {**os.environ, "ALLOT_NATS_URL": stack.url, "ALLOT_IDENTITY": str(stack.operator)}
    head = f"{sys.executable} -m allot.client.cli logs {reply.job_id} | head -c 10"
    done = await asyncio.to_thread(_run, ["bash", "-o", "pipefail", "-c", head], env)
    assert (done.returncode, done.stdout, done.stderr) == (0, bytes(range(10)), b"")


def _cli_bytes(stack: Stack, *args: str) -> bytes:
    env = {**os.environ, "ALLOT_NATS_URL": stack.url, "ALLOT_IDENTITY": str(stack.operator)}
    done = subprocess.run(
        [sys.executable, "-m", "allot.client.cli", *args], env=env, capture_output=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


async def test_follow_shows_lines_as_they_come_and_ends_with_the_job(
    stack: Stack, client: AsyncClient, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    code = (
        "import os, time\n"
        "print('first', flush=True)\n"
        "while not os.path.exists(os.environ['GO']): time.sleep(0.05)\n"
        "print('last', flush=True)\n"
    )
    spec = JobSpec(account="lab/a", gpus=1, command=python(code), env={"GO": str(go)})
    reply = await client.submit(spec)
    assert reply.job_id is not None
    job_id = reply.job_id
    follower = await _follow(stack, job_id)
    assert follower.stdout is not None
    try:
        first = await asyncio.wait_for(follower.stdout.readline(), 20)
        assert first == b"first\n"
        assert running(await client.state(), job_id)  # shown while the job still runs
        go.touch()
        rest = await asyncio.wait_for(follower.stdout.read(), 20)
        assert rest == b"last\n"
        assert await asyncio.wait_for(follower.wait(), 10) == 0
    finally:
        if follower.returncode is None:
            follower.kill()
            await follower.wait()
    assert (await client.wait(job_id, timeout=10)).status == "succeeded"


async def test_follow_goes_on_with_the_next_attempt_of_a_requeued_job(
    stack: Stack, client: AsyncClient, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    code = (
        "import os, time\n"
        "print('attempt', os.environ['ALLOT_ATTEMPT'], flush=True)\n"
        "while not os.path.exists(os.environ['GO']): time.sleep(0.05)\n"
    )
    spec = JobSpec(
        account="lab/a", gpus=1, resumable=True, command=python(code), env={"GO": str(go)}
    )
    reply = await client.submit(spec)
    assert reply.job_id is not None
    job_id = reply.job_id
    state = await until(client, lambda s: running(s, job_id))
    [first_node] = state.jobs[job_id].placements
    follower = await _follow(stack, job_id)
    assert follower.stdout is not None
    try:
        assert await asyncio.wait_for(follower.stdout.readline(), 20) == b"attempt 0\n"
        drained = cli(stack, "nodes", "cordon", first_node, "--drain", "--reason", "test")
        assert drained.returncode == 0, drained.stderr
        assert await asyncio.wait_for(follower.stdout.readline(), 30) == b"attempt 1\n"
        go.touch()
        assert await asyncio.wait_for(follower.stdout.read(), 20) == b""
        assert await asyncio.wait_for(follower.wait(), 10) == 0
    finally:
        if follower.returncode is None:
            follower.kill()
            await follower.wait()
    done = await client.wait(job_id, timeout=10)
    assert (done.status, done.attempts) == ("succeeded", 1)
    assert first_node not in done.placements


async def test_submit_wait_shows_the_output_where_the_nodes_disk_is_not(
    stack: Stack, tmp_path: Path
) -> None:
    """The CLI in a mount namespace where the nodes' directories are empty, as on another
    machine: the output comes from the node agent."""
    nodes = stack.data_dir / "nodes"
    nodes.mkdir(exist_ok=True)  # where the agents make their job directories
    env = {**os.environ, "ALLOT_NATS_URL": stack.url, "ALLOT_IDENTITY": str(stack.operator)}
    hidden = f'mount -t tmpfs none {nodes} && exec "$@"'
    allot = [sys.executable, "-m", "allot.client.cli"]
    submit = ["submit", "--gpus", "1", "--account", "demo", "--wait", "--"]
    job = [sys.executable, "-c", "print('from afar')"]
    argv = ["unshare", "-rm", "sh", "-c", hidden, "sh", *allot, *submit, *job]
    done = await asyncio.to_thread(_run, argv, env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == b"from afar\n"


def _run(argv: list[str], env: dict[str, str]) -> "subprocess.CompletedProcess[bytes]":
    return subprocess.run(argv, env=env, capture_output=True, timeout=60)


async def test_hostile_requests_get_field_errors_and_the_agent_serves_on(
    stack: Stack, client: AsyncClient
) -> None:
    reply = await client.submit(JobSpec(account="lab/a", gpus=1, command=python("print('ok')")))
    assert reply.job_id is not None
    job_id = reply.job_id
    await client.wait(job_id, timeout=20)
    [node_id] = (await client.state()).jobs[job_id].placements
    subject = output_request(node_id, client.principal, client.operator)

    async def ask(payload: bytes) -> OutputReply:
        msg = await client.events.nc.request(subject, payload, timeout=5)
        return msgspec.json.decode(msg.data, type=OutputReply)

    hostile = [
        ({"job_id": job_id, "offset": -1}, "offset"),
        ({"job_id": job_id, "max_bytes": 1 << 40}, "max_bytes"),
        ({"job_id": job_id, "max_bytes": 0}, "max_bytes"),
        ({"job_id": "../../etc"}, "job_id"),
        ({"job_id": "x" * 100_000}, "job_id"),
        ({"job_id": "no-such-job"}, "job_id"),
        ({"job_id": job_id, "attempt": 7}, "attempt"),
        ({"job_id": job_id, "attempt": -1}, "attempt"),
        ({"job_id": job_id, "path": "/etc/passwd"}, "path"),
        ({"job_id": ["j"]}, "job_id"),
    ]
    for payload, field in hostile:
        answer = await ask(json.dumps(payload).encode())
        assert [e.field for e in answer.errors] == [field], (payload, answer.errors)
        assert answer.data == b""
        assert len(answer.errors[0].value) < 300  # a huge value is cut, not echoed
    for junk in (b"", b"not json", b"[" * 100_000, b"\xff" * 1000):
        answer = await ask(junk)
        assert answer.errors
        assert answer.data == b""
    no_such = (await ask(json.dumps({"job_id": "no-such-job"}).encode())).errors[0]
    assert no_such.message == f"no such job in the log {node_id} read"

    served = await ask(json.dumps({"job_id": job_id, "offset": 1, "max_bytes": 2}).encode())
    assert (served.errors, served.data, served.next_offset) == ([], b"k\n", 3)
    assert (served.size, served.ended, served.attempt) == (3, True, 0)
    past_the_end = await ask(json.dumps({"job_id": job_id, "offset": 10**6}).encode())
    assert (past_the_end.data, past_the_end.next_offset, past_the_end.size) == (b"", 10**6, 3)


async def test_an_answer_goes_only_to_the_asker(stack: Stack, client: AsyncClient) -> None:
    """A request whose reply subject is not the asker's inbox is dropped: the agent may
    publish its own heartbeats (and events), and must not publish an answer there."""
    reply = await client.submit(JobSpec(account="lab/a", gpus=1, command=python("print(1)")))
    assert reply.job_id is not None
    await client.wait(reply.job_id, timeout=20)
    heard: list[bytes] = []

    async def hear(msg: object) -> None:
        heard.append(getattr(msg, "data", b""))

    await client.events.nc.subscribe(HEARTBEATS, cb=hear)
    ask = json.dumps({"job_id": reply.job_id}).encode()
    for node_id in ("node-1", "node-2"):
        subject = output_request(node_id, client.principal, client.operator)
        await client.events.nc.publish(subject, ask, reply=f"allot.hb.{node_id}")
    await client.events.nc.flush()
    await asyncio.sleep(1)
    assert heard  # the heartbeats themselves
    assert not [data for data in heard if b'"data"' in data]


async def test_only_who_may_see_a_job_reads_its_output(stack: Stack) -> None:
    async with await stack.client() as admin:
        await admin.apply_accounts(TREE)
    async with (
        await as_user(stack, "alice") as alice,
        await as_user(stack, "bob") as bob,
        await as_user(stack, "vera") as vera,
    ):
        mine = await alice.submit(JobSpec(account="lab/vision", gpus=1, command=["echo", "hi"]))
        assert mine.job_id is not None
        job_id = mine.job_id
        await alice.wait(job_id, timeout=20)

        assert (await alice.output(job_id)).data == b"hi\n"  # who submitted it
        assert (await vera.output(job_id)).data == b"hi\n"  # an admin of its account
        with pytest.raises(CommandError) as refused:
            await bob.output(job_id)
        [error] = refused.value.errors
        assert (error.field, error.value) == ("job_id", job_id)
        assert f"bob may not read the output of {job_id}" in error.message
        # Nor does the server let bob ask as alice, or as an operator.
        [node_id] = (await bob.state()).jobs[job_id].placements
        ask = msgspec.json.encode({"job_id": job_id})
        for subject in (
            output_request(node_id, "alice", False),
            output_request(node_id, "bob", True),
        ):
            with pytest.raises(CommandError, match="does not let bob send"):
                await bob._request_once(subject, ask, 5)
        bob_cli = cli(stack, "logs", job_id, identity=stack.data_dir / "identities" / "bob.json")
        assert bob_cli.returncode == 2
        assert "bob may not read the output of" in bob_cli.stderr
        assert "Traceback" not in bob_cli.stderr


async def test_a_job_that_has_not_started_says_so_and_is_followed_once_it_starts(
    stack: Stack, client: AsyncClient
) -> None:
    sleeper = JobSpec(account="lab/a", gpus=4, command=python("import time; time.sleep(60)"))
    blocker = await client.submit(sleeper)
    assert blocker.job_id is not None
    blocker_id = blocker.job_id
    later = await client.submit(
        msgspec.structs.replace(sleeper, command=python("print('at last', flush=True)"))
    )
    never = await client.submit(sleeper)
    assert later.job_id is not None
    assert never.job_id is not None
    later_id, never_id = later.job_id, never.job_id

    def both_wait(state: State) -> bool:
        return running(state, blocker_id) and all(
            j in state.jobs and state.jobs[j].reason is not None for j in (later_id, never_id)
        )

    await until(client, both_wait)
    waiting = cli(stack, "logs", later_id)
    assert (waiting.returncode, waiting.stdout) == (1, "")
    assert waiting.stderr == f"allot: {later_id} has not started: the job is pending\n"

    await client.cancel(never_id)
    await client.wait(never_id, timeout=10)
    cancelled = cli(stack, "logs", never_id)
    assert (cancelled.returncode, cancelled.stdout) == (1, "")
    assert cancelled.stderr.startswith(f"allot: {never_id} never started: the job cancelled")
    unknown = cli(stack, "logs", "no-such-job")
    assert (unknown.returncode, unknown.stderr) == (1, "allot: no job no-such-job\n")

    # Followed while it waits: shown once it has started, until it ends.
    follower = await _follow(stack, later_id)
    assert follower.stdout is not None
    try:
        await asyncio.sleep(1)
        assert follower.returncode is None  # still waiting for the job to start
        await client.cancel(blocker_id)
        shown = await asyncio.wait_for(follower.stdout.read(), 20)
        assert shown == b"at last\n"
        assert await asyncio.wait_for(follower.wait(), 10) == 0
    finally:
        if follower.returncode is None:
            follower.kill()
            await follower.wait()


async def _follow(stack: Stack, job_id: str) -> asyncio.subprocess.Process:
    """``allot logs -f JOB``, running."""
    env = {**os.environ, "ALLOT_NATS_URL": stack.url, "ALLOT_IDENTITY": str(stack.operator)}
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "allot.client.cli", "logs", "-f", job_id,
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
