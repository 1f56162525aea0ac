"""A JetStream cluster of three nats-servers on loopback, the log at R3: what is acknowledged
survives the loss of the stream's leader, once, and every client finds the servers left."""

import asyncio
import collections
import contextlib
import itertools
import os
import signal
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import nats
import nats.aio.msg
import nats.errors
import pytest

from allot.bus import EmbeddedNats, EventLog, eventlog
from allot.bus.cluster import NatsCluster
from allot.bus.identity import OPERATOR, Keyring, load
from allot.bus.server import free_port
from allot.bus.snapshots import write_snapshot
from allot.client import AsyncClient
from allot.client.sending import CommandError
from allot.core.validate import validate_cancel
from allot.proto.commands import CancelReply, CancelRequest, SubmitReply
from allot.proto.events import JobCancelRequested
from allot.proto.subjects import (
    ADMIN,
    CANCEL,
    MIRROR,
    SNAPSHOT_STREAM,
    STREAM,
    SUBMIT,
    StreamSettings,
    from_anyone,
)
from allot.services.replies import not_stored
from tests import builders as b
from tests.integration.test_deploy import allot
from tests.stack import cli

WRITERS = 3  # connections appending at once, as the services do
IN_FLIGHT = 4  # appends each connection awaits at once
ATTEMPT_S = 1.0  # how long a writer waits for an acknowledgement before it sends again
R3 = StreamSettings(replicas=3)


async def test_clients_and_services_take_a_list_of_servers_and_use_one_that_answers(
    tmp_path: Path,
) -> None:
    nobody = f"nats://127.0.0.1:{free_port()}"  # a member that is away
    async with EmbeddedNats(tmp_path / "nats") as server:
        listed = f"{nobody},{server.url}"
        events = await EventLog.connect(listed, name="allot-intake")
        try:
            assert await events.last_seq() == 0
        finally:
            await events.close()
        async with await AsyncClient.connect(listed) as client:
            assert await client.events.last_seq() == 0


async def test_a_submission_the_log_cannot_store_yet_is_sent_again_through_an_election(
    nats_server: EmbeddedNats,
) -> None:
    """While a cluster elects the log's leader (up to ten seconds: nats-server's election
    timeout is four to nine), the intake answers 'not stored, retry' at once. A client
    that gave up after a few quick tries would fail a submission a moment later stored."""
    loop = asyncio.get_running_loop()
    electing_until = loop.time() + 4
    nc = await nats.connect(nats_server.url)
    asked: list[bytes] = []

    async def intake(msg: nats.aio.msg.Msg) -> None:
        asked.append(msg.data)
        if loop.time() < electing_until:
            error = RuntimeError("nats: no response from stream")
            await msg.respond(msgspec.json.encode(SubmitReply(errors=[not_stored(error)])))
        else:
            await msg.respond(msgspec.json.encode(SubmitReply(job_id="j-1", seq=1)))

    await nc.subscribe(from_anyone(ADMIN + SUBMIT), cb=intake)
    try:
        async with await AsyncClient.connect(nats_server.url) as client:
            reply = await client.submit(b.spec(), idempotency_key="ci-build-7")
    finally:
        await nc.close()
    assert reply.job_id == "j-1"
    assert len(set(asked)) == 1  # the same submission, key and all, each time


@dataclass
class Load:
    """What the writers were told: each key's sequence, when each acknowledgement came,
    and how often they sent an event again."""

    acked: dict[str, int] = field(default_factory=dict)
    acked_at: list[float] = field(default_factory=list)
    resent: int = 0
    stop: asyncio.Event = field(default_factory=asyncio.Event)


async def append_until_stopped(events: EventLog, name: str, load: Load) -> None:
    """Submissions, each under its own key, each sent again with the same message id
    until acknowledged: as a CI client retries a submission that timed out."""
    loop = asyncio.get_running_loop()
    for number in range(10**9):
        if load.stop.is_set():
            return
        key = f"{name}-{number}"
        event = b.submitted(key, key=key)
        while True:
            try:
                appended = await asyncio.wait_for(events.append(event, msg_id=key), ATTEMPT_S)
                break
            except (TimeoutError, nats.errors.Error):
                load.resent += 1
                await asyncio.sleep(0.05)  # an error can come at once: no busy loop
        load.acked[key] = appended.seq
        load.acked_at.append(loop.time())


async def leader(js: nats.js.JetStreamContext) -> str | None:
    """The stream's leader now; None while there is none (or no answer)."""
    with contextlib.suppress(TimeoutError, nats.errors.Error):
        info = await js.stream_info(STREAM)
        if info.cluster is not None and info.cluster.leader:
            return info.cluster.leader
    return None


async def watch(servers: list[str]) -> nats.NATS:
    async def quiet(error: Exception) -> None:
        """A member that went away is what this test is about."""

    return await nats.connect(servers, max_reconnect_attempts=-1, error_cb=quiet)


async def connected(cluster: NatsCluster, server_name: str, on: bool) -> EventLog:
    """A connection to the whole cluster that came to ``server_name`` (``on``) or to
    another member."""
    port = cluster.member(server_name).port
    for _ in range(50):
        events = await EventLog.connect(cluster.url, settings=R3)
        url = events.nc.connected_url
        if url is not None and (url.port == port) == on:
            return events
        await events.close()
    raise AssertionError(f"no connection came {'to' if on else 'past'} {server_name}")


async def writers_on_and_off(cluster: NatsCluster, server_name: str) -> list[EventLog]:
    """Connections to the whole cluster, at least one of them to ``server_name`` and one to
    another member (a client picks a member at random)."""
    port = cluster.member(server_name).port

    def on_it(events: EventLog) -> bool:
        return events.nc.connected_url is not None and events.nc.connected_url.port == port

    kept: list[EventLog] = []
    for _ in range(50):
        events = await EventLog.connect(cluster.url, settings=R3)
        sides = {on_it(e) for e in kept}
        if on_it(events) not in sides or len(sides) == 2:
            kept.append(events)
        else:
            await events.close()
        if len(kept) == WRITERS:
            return kept
    raise AssertionError("no connection came to each side")


@pytest.mark.slow
async def test_losing_the_streams_leader_under_load_loses_and_duplicates_nothing(
    tmp_path: Path,
) -> None:
    loop = asyncio.get_running_loop()
    async with NatsCluster(tmp_path / "nats", 3) as cluster:
        await (await EventLog.connect(cluster.url, settings=R3)).close()
        watcher = await watch(cluster.url.split(","))
        js = watcher.jetstream(timeout=0.25)
        first = await leader(js)
        assert first is not None
        writers = await writers_on_and_off(cluster, first)
        load = Load()
        tasks = [
            asyncio.create_task(append_until_stopped(events, f"w{w}-{i}", load))
            for w, events in enumerate(writers)
            for i in range(IN_FLIGHT)
        ]
        try:
            await asyncio.sleep(2)
            before = len(load.acked)
            victim = cluster.member(first)
            assert victim.pid is not None
            survivors = [m.url for m in cluster.members if m is not victim]
            await watcher.close()  # and watch from a survivor, not from the one that dies
            watcher = await watch(survivors)
            js = watcher.jetstream(timeout=0.25)
            killed_at = loop.time()
            os.kill(victim.pid, signal.SIGKILL)
            while (now_leader := await leader(js)) in (None, first):
                await asyncio.sleep(0.02)
            election_s = loop.time() - killed_at
            await asyncio.sleep(2)  # the load goes on without the old leader
            await victim.start()  # it comes back on its port, with its store
            await asyncio.sleep(2)
        finally:
            load.stop.set()
            await asyncio.gather(*tasks)
            for events in writers:
                await events.close()
        during = sorted(t for t in load.acked_at if t >= killed_at - 1)
        stall_s = max(later - earlier for earlier, later in itertools.pairwise(during))
        stall_s = max(stall_s, during[0] - killed_at)

        # Every acknowledged key is in the log once, where its acknowledgement said.
        events = await EventLog.connect(cluster.url, settings=R3)
        records = await events.read()
        await events.close()
        await watcher.close()
        times = collections.Counter(r.headers.get("Nats-Msg-Id") for r in records)
        seq_of = {r.headers.get("Nats-Msg-Id"): r.seq for r in records}
        lost = [key for key in load.acked if key not in seq_of]
        duplicated = [key for key, count in times.items() if count > 1]
        moved = [key for key, seq in load.acked.items() if seq_of.get(key, seq) != seq]
        print(
            f"\nR3 leader {first} killed under load ({WRITERS}x{IN_FLIGHT} writers): "
            f"new leader {now_leader} after {election_s:.2f}s; longest stall of "
            f"acknowledgements {stall_s:.2f}s; {len(load.acked)} acknowledged "
            f"({before} before the kill), {load.resent} sent again, {len(records)} in the "
            f"log, {len(lost)} lost, {len(duplicated)} duplicated"
        )
        assert before > 0
        assert len(load.acked) > before  # it kept going
        assert (lost, duplicated, moved) == ([], [], [])
        assert len(records) == len(load.acked)  # nothing but what was acknowledged
        # Acknowledgements wait for the election, and not much beyond it: a writer notices
        # within one attempt that its append went nowhere, and sends it again.
        assert stall_s <= election_s + ATTEMPT_S + 1.0
        verified = cli(cluster.url, "replay", "--verify")
        assert verified.returncode == 0, verified.stderr
        assert f"{len(records)} events folded" in verified.stdout


@pytest.mark.slow
async def test_a_follower_reads_on_when_the_streams_leader_dies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its connection stays (it is to another member) but its consumer, on the leader, is
    gone: it must notice, and read on from where it was, in order, once there is a leader,
    rather than fail because the log cannot say how long it is while there is none."""
    monkeypatch.setattr(eventlog, "STALL_CHECK_S", 1.0)  # so that it looks while there is none
    loop = asyncio.get_running_loop()
    async with NatsCluster(tmp_path / "nats", 3) as cluster:
        writer = await EventLog.connect(cluster.url, settings=R3)
        watcher = await watch(cluster.url.split(","))
        first = await leader(watcher.jetstream(timeout=0.25))
        assert first is not None
        victim = cluster.member(first)
        follower = await connected(cluster, first, on=False)
        seen: list[int] = []
        seen_at: dict[int, float] = {}

        async def follow() -> None:
            async with contextlib.aclosing(follower.follow(1)) as records:
                async for record in records:
                    seen.append(record.seq)
                    seen_at[record.seq] = loop.time()

        load = Load()
        reading = asyncio.create_task(follow())
        writing = asyncio.create_task(append_until_stopped(writer, "w", load))
        try:
            await asyncio.sleep(1)
            await watcher.close()
            watcher = await watch([m.url for m in cluster.members if m is not victim])
            assert victim.pid is not None
            os.kill(victim.pid, signal.SIGKILL)
            killed_at = loop.time()
            while await leader(watcher.jetstream(timeout=0.25)) in (None, first):
                await asyncio.sleep(0.02)
            elected_at = loop.time()
            await asyncio.sleep(2)
            load.stop.set()
            await writing
            last = max(load.acked.values())
            async with asyncio.timeout(15):
                while not seen or seen[-1] < last:
                    assert not reading.done(), reading.exception()
                    await asyncio.sleep(0.05)
        finally:
            load.stop.set()
            reading.cancel()
            with contextlib.suppress(asyncio.CancelledError, nats.errors.Error):
                await reading
            for connection in (writer, follower):
                await connection.close()
            await watcher.close()
        assert seen == list(range(1, last + 1))  # in order, none skipped, none twice
        acked_at = dict(zip(load.acked.values(), load.acked_at, strict=True))
        lag_s = max(seen_at[seq] - at for seq, at in acked_at.items())
        print(
            f"\nfollower: leader {first} killed, another elected after "
            f"{elected_at - killed_at:.2f}s; {len(seen)} records read in order; the longest "
            f"from an acknowledgement to the follower {lag_s:.2f}s"
        )
        # Behind the acknowledgements by a look (the stall check) and an ask at most.
        assert lag_s <= eventlog.STALL_CHECK_S + eventlog.FOLLOWER_ASKS_S + 1.0


async def test_deploy_init_makes_the_log_and_the_users_mirror_at_three_replicas(
    tmp_path: Path,
) -> None:
    keyring = Keyring(tmp_path / "ids")
    keyring.ensure_installation([])
    async with NatsCluster(tmp_path / "nats", 3, keyring=keyring) as cluster:
        init = ["deploy", "init", "--identities", str(tmp_path / "ids"), "--nats-url"]
        refused = await asyncio.to_thread(allot, *init, cluster.url, "--replicas", "2")
        assert refused.returncode == 2
        assert "--replicas" in refused.stderr
        assert "'2'" in refused.stderr
        made = await asyncio.to_thread(allot, *init, cluster.url, "--replicas", "3")
        assert made.returncode == 0, made.stderr
        operator = load(keyring.path(OPERATOR))
        async with await AsyncClient.connect(cluster.url, operator) as client:
            log = await client.events.js.stream_info(STREAM)
        reader = load(keyring.add("alice", "user"))
        cluster.reload()
        async with await AsyncClient.connect(cluster.url, reader) as client:
            mirror = await client.events.js.stream_info(MIRROR)
        assert (log.config.num_replicas, mirror.config.num_replicas) == (3, 3)


@pytest.mark.slow
async def test_a_cluster_started_again_on_its_stores_has_its_log(tmp_path: Path) -> None:
    """`allot up --nats-cluster 3` again: new ports, the same stores and server names."""
    async with NatsCluster(tmp_path / "nats", 3) as cluster:
        events = await EventLog.connect(cluster.url, settings=R3)
        for n in range(5):
            await events.append(b.submitted(f"j{n}"), msg_id=f"m{n}")
        await events.close()
    async with NatsCluster(tmp_path / "nats", 3) as cluster:
        events = await EventLog.connect(cluster.url, settings=R3)
        try:
            records = await events.read()
            info = await events.js.stream_info(STREAM)
        finally:
            await events.close()
    assert [r.headers["Nats-Msg-Id"] for r in records] == [f"m{n}" for n in range(5)]
    assert info.config.num_replicas == 3


async def test_the_snapshots_are_kept_in_as_many_copies_as_the_log(tmp_path: Path) -> None:
    """A snapshot on one server alone would be lost with it, and every restart after that
    would fold the whole log again."""
    async with NatsCluster(tmp_path / "nats", 3) as cluster:
        events = await EventLog.connect(cluster.url, settings=R3)
        try:
            await write_snapshot(events.js, b"state", "a test")
            info = await events.js.stream_info(SNAPSHOT_STREAM)
        finally:
            await events.close()
    assert info.config.num_replicas == 3


async def test_a_cancel_whose_answer_was_lost_is_not_reported_as_refused_when_sent_again(
    nats_server: EmbeddedNats,
) -> None:
    """The first cancel was stored but its answer lost (a leader change, a slow link); the
    try after it finds the job cancelled. That is the outcome asked for, not a refusal."""
    nc = await nats.connect(nats_server.url)
    asked: list[bytes] = []
    cancelled = b.fold(
        b.submitted("j-1"),
        JobCancelRequested(meta=b.meta(), job_id="j-1", reason="by its owner"),
    )

    async def intake(msg: nats.aio.msg.Msg) -> None:
        asked.append(msg.data)
        if len(asked) == 1:
            return  # stored; the answer never arrives
        request = msgspec.json.decode(msg.data, type=CancelRequest)
        errors = validate_cancel(request, cancelled)
        await msg.respond(msgspec.json.encode(CancelReply(job_id="j-1", errors=errors)))

    await nc.subscribe(from_anyone(ADMIN + CANCEL), cb=intake)
    try:
        async with await AsyncClient.connect(nats_server.url) as client:
            reply = await client.cancel("j-1", reason="by its owner", timeout=0.5)
        async with await AsyncClient.connect(nats_server.url) as client:
            with pytest.raises(CommandError, match="already ended"):  # sent once, it says so
                await client.cancel("j-1", timeout=0.5)
    finally:
        await nc.close()
    assert (reply.job_id, reply.errors) == ("j-1", [])
    assert len(asked) == 3


@pytest.mark.slow
async def test_a_service_connecting_while_the_log_has_no_leader_waits_for_one(
    tmp_path: Path,
) -> None:
    """A cluster started again, or one that lost its majority, elects the log's leader
    some seconds after its servers answer; until then nothing answers a question about
    the stream. A service starting then must wait, not fail on the first unanswered
    question (a request gives up after 5 s)."""
    async with NatsCluster(tmp_path / "nats", 3) as cluster:
        events = await EventLog.connect(cluster.url, settings=R3)
        await events.append(b.submitted("j-1"), msg_id="m1")
        info = await events.js.stream_info(STREAM)
        await events.close()
        assert info.cluster is not None
        left = next(m for m in cluster.members if m.server_name != info.cluster.leader)
        away = [m for m in cluster.members if m is not left]  # the leader among them
        await asyncio.gather(*(member.stop() for member in away))  # no majority: no leader
        events = await asyncio.wait_for(EventLog.connect(left.url, settings=R3), 60)
        await events.close()
