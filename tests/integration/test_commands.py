"""The runtime between NATS and a command service's handlers, against a real server: a
bounded wait, an answer for every request, no work for clients that have given up."""

import asyncio
import contextlib
from collections.abc import AsyncIterator

import msgspec
import nats

from allot.bus import EmbeddedNats
from allot.proto.commands import AccountsApplyReply
from allot.proto.subjects import ACCOUNTS_APPLY, ADMIN, command, inbox_prefix
from allot.services.commands import Commands, Lane
from allot.services.replies import Handler, Sender
from allot.services.runtime import Clock

COMMAND = ACCOUNTS_APPLY  # any command with a contract; the handlers here are the tests'
SENDER = "alice"
SUBJECT = command(SENDER, COMMAND)


@contextlib.asynccontextmanager
async def serving(
    url: str, handlers: dict[str, Handler], lane: Lane | None = None, max_wait_s: float = 10.0
) -> AsyncIterator[Commands]:
    commands = Commands("tester", Clock(), max_wait_s=max_wait_s)
    shared = lane or Lane()
    for name, handler in handlers.items():
        commands.answer(name, handler, shared)
    nc = await nats.connect(url)
    await commands.serve(nc, caught_up_at=0)
    try:
        yield commands
    finally:
        await commands.close()
        await nc.close()


async def as_sender(url: str) -> nats.NATS:
    """A client whose replies come to its sender's inbox, as every client's do."""
    return await nats.connect(url, inbox_prefix=inbox_prefix(SENDER))


async def test_every_request_is_answered_and_none_waits_unboundedly(
    nats_server: EmbeddedNats,
) -> None:
    handled: list[bytes] = []

    async def slow(payload: bytes, sender: Sender) -> AccountsApplyReply:
        await asyncio.sleep(0.5)
        handled.append(payload)
        return AccountsApplyReply(defined=[payload.decode()])

    lane = Lane(max_waiting=2)
    async with (
        serving(nats_server.url, {COMMAND: slow}, lane, max_wait_s=0.7),
        await as_sender(nats_server.url) as client,
    ):
        # One is handled at once; two wait, the second of them too long; one finds the
        # queue full.
        answers = []
        for i in range(4):
            answers.append(asyncio.create_task(client.request(SUBJECT, b"%d" % i, timeout=5)))
            await asyncio.sleep(0.02)  # in this order
        replies = [msgspec.json.decode((await a).data, type=AccountsApplyReply) for a in answers]
    assert [r.defined for r in replies[:2]] == [["0"], ["1"]]
    assert "given up" in replies[2].errors[0].message
    assert "busy" in replies[3].errors[0].message
    assert handled == [b"0", b"1"]  # the stale request cost no work


async def test_a_handler_that_raises_is_answered_and_the_queue_goes_on(
    nats_server: EmbeddedNats,
) -> None:
    async def fragile(payload: bytes, sender: Sender) -> AccountsApplyReply:
        if payload == b"boom":
            raise ZeroDivisionError("a bug")
        return AccountsApplyReply(defined=["ok"])

    async with (
        serving(nats_server.url, {COMMAND: fragile}),
        await as_sender(nats_server.url) as nc,
    ):
        failed = await nc.request(SUBJECT, b"boom", timeout=5)
        fine = await nc.request(SUBJECT, b"fine", timeout=5)
    [error] = msgspec.json.decode(failed.data, type=AccountsApplyReply).errors
    assert "ZeroDivisionError('a bug')" in error.message
    assert msgspec.json.decode(fine.data, type=AccountsApplyReply).defined == ["ok"]


async def test_a_message_whose_replies_go_elsewhere_than_its_senders_inbox_is_not_handled(
    nats_server: EmbeddedNats,
) -> None:
    """Its reply would be published with the service's rights where the sender has none:
    onto the log, or as another user's request."""
    handled: list[Sender] = []

    async def record(payload: bytes, sender: Sender) -> AccountsApplyReply:
        handled.append(sender)
        return AccountsApplyReply()

    handlers: dict[str, Handler] = {"cancel": record, ADMIN + "cancel": record}
    async with serving(nats_server.url, handlers), await as_sender(nats_server.url) as client:
        landed = await client.subscribe("allot.evt.job.forged.JobSubmitted")
        cancel = command(SENDER, "cancel")
        await client.publish(cancel, b"{}", reply="allot.evt.job.forged.JobSubmitted")
        await client.publish(cancel, b"{}")  # no reply subject at all
        await client.publish(cancel, b"{}", reply="_INBOX_bob.x")  # another's inbox
        await client.request(command(SENDER, ADMIN + "cancel"), b"{}", timeout=5)
        with contextlib.suppress(nats.errors.TimeoutError):
            await landed.next_msg(timeout=0.5)
            raise AssertionError("a reply was published outside the sender's inbox")
    assert handled == [Sender(principal=SENDER, operator=True)]


async def test_messages_that_are_no_requests_take_no_room_from_those_that_are(
    nats_server: EmbeddedNats,
) -> None:
    """JetStream's answers can be aimed at a command subject, many at a time: they must
    not fill the queue that real requests wait in."""
    started = asyncio.Event()

    async def slow(payload: bytes, sender: Sender) -> AccountsApplyReply:
        started.set()
        await asyncio.sleep(0.5)
        return AccountsApplyReply(defined=[payload.decode()])

    async with (
        serving(nats_server.url, {COMMAND: slow}, Lane(max_waiting=2)),
        await as_sender(nats_server.url) as client,
    ):
        first = asyncio.create_task(client.request(SUBJECT, b"first", timeout=5))
        await started.wait()  # the lane is busy with it
        for _ in range(50):
            await client.publish(SUBJECT, b"{}")  # no reply subject: no request
        await client.flush()
        second = await client.request(SUBJECT, b"second", timeout=5)
        assert msgspec.json.decode(second.data, type=AccountsApplyReply).defined == ["second"]
        await first
