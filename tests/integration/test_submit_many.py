"""A client's requests of several submissions (``submit_many``, docs/adr/0036) where
something goes wrong: a server that takes smaller messages, one that does not let the
client send such requests, a submission of the request that the log cannot store while
the others are taken. Each caller is answered for its own submission, and each
submission is in the log once at most."""

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from allot.bus import EmbeddedNats, EventLog, permissions
from allot.bus.eventlog import Appended
from allot.bus.identity import Keyring, load
from allot.client import AsyncClient, CommandError
from allot.proto.events import JobSpec, JobSubmitted, submissions
from allot.proto.subjects import SUBMIT_MANY
from allot.services.intake.app import Intake
from tests import builders as b

SMALL_PAYLOAD = 128 * 1024


class SmallPayloadNats(EmbeddedNats):
    """A server that takes messages of at most 128 KiB (NATS's ``max_payload``)."""

    def write_config(self) -> None:
        super().write_config()
        config = json.loads(self.config_path.read_text())
        config["max_payload"] = SMALL_PAYLOAD
        self.config_path.write_text(json.dumps(config))


@contextlib.asynccontextmanager
async def running_intake(events: EventLog) -> AsyncIterator[Intake]:
    intake = Intake(events)
    running = asyncio.create_task(intake.run())
    try:
        yield intake
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)


async def outcomes(client: AsyncClient, specs: list[JobSpec]) -> list[str | BaseException]:
    async def one(spec: JobSpec) -> str:
        reply = await client.submit(spec)
        assert reply.job_id is not None
        return reply.job_id

    return await asyncio.gather(*map(one, specs), return_exceptions=True)


async def logged(client: AsyncClient) -> list[str]:
    return [e.job_id for r in await client.events.read() for e in submissions(r.event)]


async def test_requests_of_several_stay_within_what_the_server_takes(tmp_path: Path) -> None:
    big = msgspec.structs.replace(b.spec(), env={"BIG": "x" * 40_000})  # fits alone
    async with SmallPayloadNats(tmp_path / "nats") as server:
        events = await EventLog.connect(server.url)
        await events.append(b.node("n1", 8))
        async with running_intake(events), await AsyncClient.connect(server.url) as client:
            await client.ready(timeout=10, services=("intake",))
            assert client.events.nc.max_payload == SMALL_PAYLOAD
            answered = await outcomes(client, [big] * 8)
            in_log = await logged(client)
        await events.close()
    assert all(isinstance(job_id, str) for job_id in answered), answered
    assert sorted(in_log) == sorted(answered)  # type: ignore[type-var]


async def test_the_taken_submissions_of_a_request_are_answered_whatever_befalls_the_rest(
    nats_server: EmbeddedNats, event_log: EventLog
) -> None:
    """Two submissions of a request of several are not stored (the log refuses them, and
    the intake is gone before they are sent again): the others were taken, and their
    callers are told so at once."""
    await event_log.append(b.node("n1", 8))
    async with running_intake(event_log) as intake:
        store = intake.appender.append

        def append(event: JobSubmitted) -> "asyncio.Future[Appended]":
            if not event.spec.name.startswith("lost"):
                return store(event)
            refused: asyncio.Future[Appended] = asyncio.get_running_loop().create_future()
            refused.set_exception(ConnectionError("log unavailable"))
            return refused

        intake.appender.append = append  # type: ignore[method-assign]
        async with await AsyncClient.connect(nats_server.url) as client:
            await client.ready(timeout=10, services=("intake",))
            request = client._request

            async def then_intake_goes(name: str, *args: Any, **options: Any) -> Any:
                reply = await request(name, *args, **options)
                if name == SUBMIT_MANY:
                    await intake.commands.close()
                return reply

            client._request = then_intake_goes  # type: ignore[method-assign]
            names = ["a0", "a1", "taken2", "lost3", "taken4", "lost5", "taken6"]
            specs = [msgspec.structs.replace(b.spec(), name=name) for name in names]
            answered = dict(zip(names, await outcomes(client, specs), strict=True))
            in_log = await logged(client)
    assert all(isinstance(answered[name], str) for name in ("taken2", "taken4", "taken6"))
    assert {answered[name] for name in ("a0", "a1", "taken2", "taken4", "taken6")} == set(in_log)
    assert all(isinstance(answered[name], Exception) for name in ("lost3", "lost5"))


async def test_a_client_not_allowed_requests_of_several_sends_each_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server configured before there were requests of several lets a user send only
    ``submit``: the client's submissions go alone, and none is refused for it."""
    allowed: Callable[..., dict[str, Any]] = permissions.permissions

    def without_many(identity: Any) -> dict[str, Any]:
        block = allowed(identity)
        publish = block["publish"]["allow"]
        block["publish"]["allow"] = [s for s in publish if not s.endswith(SUBMIT_MANY)]
        return block

    monkeypatch.setattr(permissions, "permissions", without_many)
    keyring = Keyring(tmp_path / "ids")
    keyring.ensure("admin", "operator")
    who = {name: load(keyring.ensure(name, name)) for name in ("intake",)}
    alice = load(keyring.ensure("alice", "user"))
    admin = load(keyring.ensure("admin", "operator"))
    async with EmbeddedNats(tmp_path / "nats", keyring=keyring) as server:
        events = await EventLog.connect(server.url, identity=who["intake"])
        operator = await EventLog.connect(server.url, identity=admin)
        await operator.append(b.node("n1", 8))
        connecting = AsyncClient.connect(server.url, identity=alice)
        async with running_intake(events), await connecting as client:
            await client.ready(timeout=10, services=("intake",))
            answered = await outcomes(client, [b.spec() for _ in range(12)])
        in_log = await logged(AsyncClient(operator, "admin", True))
        await events.close()
        await operator.close()
    assert not [a for a in answered if isinstance(a, CommandError)], answered
    assert sorted(in_log) == sorted(answered)  # type: ignore[type-var]
