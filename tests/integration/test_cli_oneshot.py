"""The command line's one-shot connection (``allot.client.oneshot``) against real
nats-servers, where servers come and go and a cluster's members disagree: it waits for a
server that is restarting, and takes the member that admits its identity."""

import asyncio
import time
from pathlib import Path

import nats
import pytest
from nats.aio.msg import Msg

from allot.bus import EmbeddedNats
from allot.bus.identity import IdentityError, Keyring, load
from allot.client.oneshot import CONNECT_PATIENCE_S, Connection
from allot.proto.commands import SubmitReply

REPLY = b'{"job_id":"j-1","seq":1}'


async def answering(url: str) -> nats.NATS:
    """Something that answers every submission, as the intake would."""
    nc = await nats.connect(url)

    async def answer(msg: Msg) -> None:
        await msg.respond(REPLY)

    await nc.subscribe("allot.cmd.*.submit", cb=answer)
    await nc.subscribe("allot.cmd.*.admin.submit", cb=answer)
    await nc.flush()
    return nc


async def test_a_server_that_comes_up_a_moment_later_is_waited_for(tmp_path: Path) -> None:
    """As `allot up` restarts its NATS server: the command started before it was back."""
    server = EmbeddedNats(tmp_path / "nats")
    began = time.monotonic()
    opening = asyncio.create_task(asyncio.to_thread(Connection.open, server.url))
    await asyncio.sleep(1.0)
    assert not opening.done()
    async with server:
        connection = await opening
        with connection:
            responder = await answering(server.url)
            try:
                reply = await asyncio.to_thread(
                    connection.ask, "submit", b"{}", SubmitReply, 5.0, 1
                )
            finally:
                await responder.close()
    assert reply.job_id == "j-1"
    assert time.monotonic() - began < CONNECT_PATIENCE_S + 2


async def test_a_server_that_stays_away_is_given_up_on(tmp_path: Path) -> None:
    server = EmbeddedNats(tmp_path / "nats")  # never started
    began = time.monotonic()
    with pytest.raises(ConnectionError, match="Connection refused"):
        await asyncio.to_thread(Connection.open, server.url)
    assert CONNECT_PATIENCE_S - 1.5 < time.monotonic() - began < CONNECT_PATIENCE_S + 2


async def test_a_member_that_does_not_admit_the_identity_yet_is_passed_over(
    tmp_path: Path,
) -> None:
    """One member's configuration is behind: alice was added to the other's only."""
    behind = Keyring(tmp_path / "behind")
    behind.ensure_installation([])
    current = Keyring(tmp_path / "current")
    current.ensure_installation([])
    alice = load(current.add("alice", "user"))
    async with (
        EmbeddedNats(tmp_path / "a", keyring=behind) as a,
        EmbeddedNats(tmp_path / "b", keyring=current) as b,
    ):
        with Connection.open(f"{a.url},{b.url}", alice) as connection:
            assert connection.principal == "alice"
        with pytest.raises(IdentityError, match="does not admit the identity 'alice'"):
            Connection.open(a.url, alice)
