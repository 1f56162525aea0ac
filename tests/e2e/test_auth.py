"""Nobody acts for another team, against a stack with identities on (the default): the NATS
server refuses what an identity may not send, the services refuse what a principal may not
ask, and every event a command makes names who asked."""

import asyncio
import json
import socket
from pathlib import Path

import msgspec
import nats
import pytest
from nats.aio.msg import Msg

from allot.bus import EventLog, Record
from allot.bus.identity import load, new_identity, save
from allot.client import AsyncClient, CommandError
from allot.client.stack import Stack
from allot.proto.events import JobSpec
from allot.proto.subjects import (
    ACCOUNTS_APPLY,
    MIRROR,
    MIRROR_API,
    STREAM,
    SUBMIT,
    heartbeat,
    samples,
)
from allot.proto.telemetry import GpuFault, Heartbeat
from tests.stack import cli, running, until

TREE = {
    "lab": {},
    "lab/vision": {"members": ["alice"], "admins": ["vera"]},
    "lab/nlp": {"members": ["bob"]},
}


def job(account: str) -> JobSpec:
    return JobSpec(account=account, gpus=1, command=["sleep", "60"])


async def as_user(stack: Stack, name: str) -> AsyncClient:
    assert stack.keyring is not None
    path = stack.keyring.path(name)
    if not path.exists():
        stack.keyring.add(name, "user")
        stack.nats.reload()
        await asyncio.sleep(0.5)  # the server rereads its config
    return await AsyncClient.connect(stack.url, load(path))


@pytest.mark.slow
async def test_without_an_identity_nothing_connects(stack: Stack) -> None:
    with pytest.raises((nats.errors.NoServersError, nats.errors.Error, TimeoutError)):
        await asyncio.wait_for(
            nats.connect(stack.url, max_reconnect_attempts=0, connect_timeout=2), 10
        )


@pytest.mark.slow
async def test_the_cli_says_plainly_that_an_identity_is_not_admitted(
    stack: Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ALLOT_HOME", str(tmp_path / "nobody-home"))
    stranger = tmp_path / "stranger.json"
    save(new_identity("stranger", "user"), stranger)
    for identity, who in [
        (stranger, "the identity 'stranger'"),
        (None, "a client without an identity"),
    ]:
        done = cli(stack.url, "status", identity=identity)
        assert done.returncode != 0
        assert f"does not admit {who}" in done.stderr
        assert "Traceback" not in done.stderr


async def test_a_user_cannot_append_to_the_log(stack: Stack) -> None:
    async with await as_user(stack, "mallory") as mallory:
        before = await mallory.events.last_seq()
        forged = b'{"type":"JobExited","job_id":"j-1","node_id":"node-1","exit_code":0}'
        with pytest.raises(nats.errors.TimeoutError):
            await mallory.events.js.publish("allot.evt.job.j-1.JobExited", forged, timeout=2)
        assert await mallory.events.last_seq() == before


async def test_a_user_cannot_have_answers_written_onto_the_log(stack: Stack) -> None:
    """JetStream and the services answer on the reply subject a request names: a user's
    requests must not get an answer appended to the log."""
    async with await stack.client() as admin, await as_user(stack, "mallory") as mallory:
        before = await admin.events.last_seq()
        onto_log = "allot.evt.job.j-evil.JobSubmitted"
        for api in (
            "$JS.API.STREAM.INFO.ALLOT",
            "$JS.API.STREAM.INFO.ALLOT_RO",
            "$JS.API.CONSUMER.CREATE.ALLOT_RO",
        ):
            await mallory.events.nc.publish(api, b"", reply=onto_log)
        await mallory.events.nc.publish(mallory.subject(SUBMIT), b"{}", reply=onto_log)
        # A direct get answers with many messages: aimed at what the users' account imports.
        assert before > 0  # there is something to answer with
        consumers = (await admin.events.js.stream_info(STREAM)).state.consumer_count
        batch = json.dumps({"seq": 1, "batch": 256}).encode()
        for imported in (
            "allot.cmd.alice.cancel",
            f"{MIRROR_API}.CONSUMER.CREATE.{STREAM}",
            f"$JS.FC.{STREAM}.x",
        ):
            await mallory.events.nc.publish(f"$JS.API.DIRECT.GET.{MIRROR}", batch, imported)
        await mallory.events.nc.flush()
        await asyncio.sleep(1)
        assert await admin.events.last_seq() == before
        assert (await admin.events.js.stream_info(STREAM)).state.consumer_count == consumers


async def test_a_user_reads_the_log_from_its_mirror(stack: Stack) -> None:
    async with await stack.client() as admin, await as_user(stack, "rita") as rita:
        assert rita.events.settings.name == MIRROR
        reply = await admin.submit(job("demo"))
        await until(rita, lambda state: reply.job_id in state.jobs)  # read from the mirror
        log = await admin.events.read()
        mirrored = await rita.events.read(1, log[-1].seq)
        assert [(r.seq, r.event) for r in mirrored] == [(r.seq, r.event) for r in log]


async def consumers_of_the_mirror(user: AsyncClient) -> int:
    return (await user.events.js.stream_info(MIRROR)).state.consumer_count


async def test_a_user_can_make_no_consumer_of_the_mirror(stack: Stack) -> None:
    """A consumer outlives whoever made it for as long as its deliveries have somewhere to
    go, and a stream takes only so many: one user could lock every other out of the log."""
    async with await as_user(stack, "mallory") as mallory:
        feed = {"deliver_subject": "allot.mirror.x", "ack_policy": "none"}
        for api, config in [
            (f"$JS.API.CONSUMER.CREATE.{MIRROR}", {}),
            (f"$JS.API.CONSUMER.CREATE.{MIRROR}", feed),
            (f"$JS.API.CONSUMER.CREATE.{MIRROR}.named", {"name": "named"}),
            (f"$JS.API.CONSUMER.CREATE.{MIRROR}.named.allot.evt.>", {"name": "named"}),
            (f"$JS.API.CONSUMER.DURABLE.CREATE.{MIRROR}.kept", {"durable_name": "kept"}),
        ]:
            ask = json.dumps({"stream_name": MIRROR, "config": config}).encode()
            with pytest.raises(nats.errors.TimeoutError):
                await mallory.events.nc.request(api, ask, timeout=1)
        assert await consumers_of_the_mirror(mallory) == 0


async def test_a_user_follows_the_log_holding_nothing_on_the_server(stack: Stack) -> None:
    async with await stack.client() as admin, await as_user(stack, "rita") as rita:
        following = asyncio.create_task(until(rita, lambda state: len(state.jobs) == 2))
        first = await admin.submit(job("demo"))
        await until(rita, lambda state: first.job_id in state.jobs)
        assert await consumers_of_the_mirror(rita) == 0
        await admin.submit(job("demo"))
        await asyncio.wait_for(following, 10)
        assert await consumers_of_the_mirror(rita) == 0


async def test_a_user_cannot_have_the_mirror_deleted_or_purged(stack: Stack) -> None:
    """The log's answer to a direct get of nothing has no body, as deleting or purging a
    stream asks: aimed at those, it must not reach the mirror's JetStream API."""
    async with (
        await stack.client() as admin,
        await as_user(stack, "mallory") as mallory,
        await as_user(stack, "rita") as rita,
    ):
        await admin.submit(job("demo"))
        last = await admin.events.last_seq()
        for api in (f"$JS.API.STREAM.PURGE.{MIRROR}", f"$JS.API.STREAM.DELETE.{MIRROR}"):
            for ask in ({"seq": 10**9}, {"seq": 1, "batch": 1}):  # 404, and a batch's end
                payload = json.dumps(ask).encode()
                await mallory.events.nc.publish(f"$JS.API.DIRECT.GET.{MIRROR}", payload, api)
        await mallory.events.nc.flush()
        await asyncio.sleep(1)
        log = await admin.events.read(1, last)
        async with asyncio.timeout(10):
            mirrored = await rita.events.read(1, last)
        assert [(r.seq, r.event) for r in mirrored] == [(r.seq, r.event) for r in log]


async def test_users_act_for_their_own_accounts_and_jobs_only(stack: Stack) -> None:
    async with await stack.client() as admin:
        await admin.apply_accounts(TREE)
    async with (
        await as_user(stack, "alice") as alice,
        await as_user(stack, "bob") as bob,
        await as_user(stack, "vera") as vera,
    ):
        before = await alice.events.last_seq()
        with pytest.raises(CommandError) as refused:
            await bob.submit(job("lab/vision"))
        [error] = refused.value.errors
        assert error.field == "account"
        assert "bob may not submit to lab/vision" in error.message
        assert "alice, vera" in error.message
        assert await alice.events.last_seq() == before  # nothing appended

        mine = await alice.submit(job("lab/vision"))
        assert mine.job_id is not None
        theirs = await bob.submit(job("lab/nlp"))
        assert theirs.job_id is not None
        with pytest.raises(CommandError, match="alice may not cancel"):
            await alice.cancel(theirs.job_id)
        with pytest.raises(CommandError, match="bob may not cancel"):
            await bob.cancel(mine.job_id)
        await vera.cancel(mine.job_id)  # an admin of lab/vision
        await bob.cancel(theirs.job_id)  # their own

        # Only an operator applies trees: the server does not let a user send it.
        with pytest.raises(CommandError, match=r"does not let alice send admin\.accounts\.apply"):
            await alice.apply_accounts({"lab": {}})
        # Nor does the server let anyone send as somebody else.
        with pytest.raises(CommandError, match="does not let alice send"):
            await alice._request_once(
                bob.subject(SUBMIT), msgspec.json.encode({"spec": job("lab/nlp")}), 5
            )

        state = await alice.state()
    assert state.jobs[mine.job_id].submitted_by == "alice"
    explained = cli(stack, "explain", mine.job_id, "--json")
    assert json.loads(explained.stdout)["submitted_by"] == "alice"
    assert f'job_id="{mine.job_id}"' in (tail := cli(stack, "log", "tail", "-n", "50").stdout)
    assert 'by="vera"' in tail
    assert state.jobs[theirs.job_id].submitted_by == "bob"
    by = {(r.type, json.loads(r.data).get("by")) for r in await stack_records(stack)}
    assert {
        ("AccountsApplied", "admin"),
        ("JobSubmitted", "alice"),
        ("JobSubmitted", "bob"),
        ("JobCancelRequested", "vera"),
        ("JobCancelRequested", "bob"),
    } <= by


async def test_a_node_agent_cannot_report_for_another_nodes_job(stack: Stack) -> None:
    """node-2's identity, as a compromised agent would use it, against a job on node-1."""
    async with await stack.client() as admin:
        reply = await admin.submit(JobSpec(account="lab/a", gpus=4, command=["sleep", "60"]))
        assert reply.job_id is not None
        job_id = reply.job_id
        await until(admin, lambda s: running(s, job_id))
    node_2 = load(stack.data_dir / "identities" / "node-2.json")
    forger = await EventLog.connect(stack.url, identity=node_2)
    try:
        before = await forger.last_seq()
        exited = {"job_id": job_id, "exit_code": 0, "output_path": "-", "meta": {"id": "f1",
                  "at": 1, "producer": "node-2"}, "type": "JobExited"}  # fmt: skip
        # Under node-1's subject: the server refuses it.
        body = msgspec.json.encode({**exited, "node_id": "node-1"})
        with pytest.raises(nats.errors.TimeoutError):
            await forger.js.publish(f"allot.evt.job.{job_id}.node-1.JobExited", body, timeout=2)
        assert await forger.last_seq() == before
        # Under its own: stored, but the fold takes neither a report naming another node
        # nor one for a job that is not on its node.
        for node_id in ("node-1", "node-2"):
            body = msgspec.json.encode({**exited, "node_id": node_id})
            await forger.js.publish(f"allot.evt.job.{job_id}.node-2.JobExited", body)
    finally:
        await forger.close()
    async with await stack.client() as admin:
        state = await admin.state()
    assert running(state, job_id)
    misplaced, not_there = (i.reason for i in state.ignored[-2:])
    assert misplaced.startswith("misplaced JobExited: appended under ")
    assert not_there == (
        f"job {job_id} is running on node-1 in attempt 0; the report is from node-2 about attempt 0"
    )


async def test_a_node_agent_cannot_speak_for_another_nodes_gpus(stack: Stack) -> None:
    """node-2's identity publishing node-1's heartbeat (an XID on every GPU) and samples:
    the server delivers neither, so no GPU of node-1 turns unhealthy."""
    operator = load(stack.operator) if stack.operator else None
    watcher = await EventLog.connect(stack.url, identity=operator)
    heard: list[bytes] = []

    async def hear(msg: Msg) -> None:
        heard.append(msg.data)

    await watcher.nc.subscribe(heartbeat("node-1"), cb=hear)
    forger = await EventLog.connect(
        stack.url, identity=load(stack.data_dir / "identities" / "node-2.json")
    )
    try:
        faults = [GpuFault(gpu=g, kind="xid", detail="XID 79", xid=79) for g in range(4)]
        forged = msgspec.json.encode(Heartbeat(node_id="node-1", at=0, running=0, faults=faults))
        for _ in range(20):
            await forger.nc.publish(heartbeat("node-1"), forged)
            await forger.nc.publish(samples("node-1"), b'{"node_id": "node-1", "gpus": []}')
        await forger.nc.flush()
        await asyncio.sleep(2)  # telemetry judges every second
    finally:
        await forger.close()
        await watcher.close()
    assert forged not in heard  # node-1's own heartbeats are heard; the forged ones not
    assert heard
    async with await stack.client() as admin:
        state = await admin.state()
    assert state.nodes["node-1"].gpu_faults == {}


async def test_an_operator_may_do_anything(stack: Stack) -> None:
    async with await stack.client() as admin:
        await admin.apply_accounts(TREE)
        reply = await admin.submit(job("lab/nlp"))  # a member of nothing
        assert reply.job_id is not None
        await admin.cancel(reply.job_id)
        assert admin.subject(ACCOUNTS_APPLY) == "allot.cmd.admin.admin.accounts.apply"


async def test_users_add_makes_an_identity_that_may_connect_at_once(
    stack: Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    where = {"nats_url": stack.url, "data_dir": str(stack.data_dir), "identity": None}
    (home / "current.json").write_text(json.dumps(where))
    monkeypatch.setenv("ALLOT_HOME", str(home))
    added = cli(stack, "users", "add", "carol")
    assert added.returncode == 0, added.stderr
    path = stack.data_dir / "identities" / "carol.json"
    assert str(path) in added.stdout
    assert path.stat().st_mode & 0o777 == 0o600
    await asyncio.sleep(0.5)
    status = cli(stack, "status", identity=path)
    assert status.returncode == 0, status.stderr


async def stack_records(stack: Stack) -> list[Record]:
    async with await stack.client() as admin:
        return await admin.events.read()


async def test_an_idempotency_key_is_the_senders_own(stack: Stack) -> None:
    """Two people of one account who happen to pick the same key get a job each: a key
    names a submission of its sender, not of whoever used it first."""
    async with await as_user(stack, "ann") as ann, await as_user(stack, "ben") as ben:
        first = await ann.submit(job("demo"), idempotency_key="nightly-1")
        other = await ben.submit(job("demo"), idempotency_key="nightly-1")
        again = await ann.submit(job("demo"), idempotency_key="nightly-1")
    assert other.job_id != first.job_id
    assert not other.duplicate
    assert (again.job_id, again.duplicate) == (first.job_id, True)


async def test_allot_submit_and_cancel_are_sent_as_their_identity_and_refused_in_one_line(
    stack: Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`allot submit` (without --wait) and `allot cancel` connect by their own one-shot
    connection, not nats-py: it signs as its identity, takes its reply through a user's imports, and
    says in one line what the server or the intake refused."""
    monkeypatch.setenv("ALLOT_HOME", str(tmp_path / "nobody-home"))
    async with await stack.client() as admin:
        await admin.apply_accounts(TREE)
    async with await as_user(stack, "alice"):  # the server admits alice from now on
        pass
    assert stack.keyring is not None
    alice = stack.keyring.path("alice")
    submit = ["submit", "--account", "lab/vision", "--gpus", "1", "--", "sleep", "60"]

    mine = cli(stack, *submit, identity=alice)
    assert mine.returncode == 0, mine.stderr
    job_id = mine.stdout.strip()

    refused = cli(stack, "submit", "--account", "lab/nlp", "--gpus", "1", "--", "true",
                  identity=alice)  # fmt: skip
    assert refused.returncode == 2
    assert "alice may not submit to lab/nlp" in refused.stderr
    assert "Traceback" not in refused.stderr

    # A node agent's identity may not send commands at all: the server refuses it.
    node = cli(stack, *submit, identity=stack.keyring.path("node-1"))
    assert node.returncode == 2, node.stderr
    assert "does not let node-1 send submit" in node.stderr
    assert "Traceback" not in node.stderr

    stranger = tmp_path / "stranger.json"
    save(new_identity("stranger", "user"), stranger)
    outside = cli(stack, *submit, identity=stranger)
    assert outside.returncode != 0
    assert outside.stderr.strip() == (
        f"allot: the NATS server at {stack.url} does not admit the identity 'stranger': ask "
        "its operator for one (`allot users add NAME`) and set ALLOT_IDENTITY to its file"
    )

    # A cluster's list whose first server is gone: the next one takes it.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        gone = probe.getsockname()[1]
    listed = cli(f"nats://127.0.0.1:{gone},{stack.url}", *submit, identity=stack.operator)
    assert listed.returncode == 0, listed.stderr

    submitted = {
        json.loads(r.data)["job_id"]: json.loads(r.data)["by"]
        for r in await stack_records(stack)
        if r.type == "JobSubmitted"
    }
    assert submitted[job_id] == "alice"
    assert submitted[listed.stdout.strip()] == "admin"
    assert len(submitted) == 2  # the refused ones stored nothing

    # `allot cancel` goes the same way.
    theirs = cli(stack, "cancel", listed.stdout.strip(), identity=alice)
    assert theirs.returncode == 2
    assert "alice may not cancel" in theirs.stderr
    cancelled = cli(stack, "cancel", job_id, identity=alice)
    assert cancelled.returncode == 0, cancelled.stderr
    assert cancelled.stdout.strip() == f"cancel requested for {job_id}"
