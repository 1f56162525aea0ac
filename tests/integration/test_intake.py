"""The intake service object against a real NATS server, reached through the client."""

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest

from allot.bus import EmbeddedNats, EventLog
from allot.client import AsyncClient, CommandError
from allot.core import apply_record
from allot.proto.commands import (
    NodeCommandRequest,
    SubmitManyReply,
    SubmitManyRequest,
    SubmitRequest,
)
from allot.proto.events import (
    AccountDefined,
    AccountSettings,
    JobCancelRequested,
    JobSpec,
    JobSubmitted,
    NodeCordoned,
)
from allot.proto.events import submissions as submitted
from allot.proto.subjects import SUBMIT, SUBMIT_MANY
from allot.services.intake.app import Intake
from allot.services.replies import Sender
from allot.services.stats import REFUSALS, REQUESTS
from tests import builders as b


@pytest.fixture
async def client(nats_server: EmbeddedNats, intake: Intake) -> AsyncIterator[AsyncClient]:
    async with await AsyncClient.connect(nats_server.url) as c:
        await c.ready(timeout=10, services=("intake",))
        yield c


async def folded(intake: Intake) -> None:
    """Wait until the intake has folded everything in the log."""
    last = await intake.events.last_seq()
    async with asyncio.timeout(10):
        while intake.state.seq < last:
            await asyncio.sleep(0.01)


def spec(**fields: object) -> JobSpec:
    values = {"account": "ml/vision", "gpus": 1, "command": ["python", "-c", "pass"], **fields}
    return JobSpec(**values)  # type: ignore[arg-type]


async def submissions(log: EventLog) -> list[JobSubmitted]:
    """Every submission in the log, appended alone or in a batch."""
    return [event for r in await log.read() for event in submitted(r.event)]


async def test_a_submission_is_appended_once(client: AsyncClient, event_log: EventLog) -> None:
    reply = await client.submit(spec(name="train"))
    [event] = await submissions(event_log)
    assert event.job_id == reply.job_id
    assert event.spec.name == "train"
    assert reply.seq == 2


async def test_a_retried_submission_with_the_same_key_is_one_job(
    client: AsyncClient, event_log: EventLog, intake: Intake
) -> None:
    first = await client.submit(spec(), idempotency_key="ci-build-7")
    again = await client.submit(spec(), idempotency_key="ci-build-7")
    assert again.job_id == first.job_id
    assert again.duplicate
    # Once the intake has folded the submission, the retry is answered from its index.
    await folded(intake)
    later = await client.submit(spec(), idempotency_key="ci-build-7")
    assert later.job_id == first.job_id
    assert later.duplicate
    assert len(await submissions(event_log)) == 1


async def test_a_key_reused_for_a_different_job_is_refused(
    client: AsyncClient, event_log: EventLog, intake: Intake
) -> None:
    await client.submit(spec(), idempotency_key="k")
    await folded(intake)
    with pytest.raises(CommandError) as refused:
        await client.submit(spec(gpus=2), idempotency_key="k")
    assert refused.value.errors[0].field == "idempotency_key"
    assert len(await submissions(event_log)) == 1


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"gpus": 0}, "gpus", "from 1 up to 1024"),
        ({"gpus": 9}, "gpus", "the largest has 8"),
        ({"command": []}, "command", "program to run"),
        ({"account": "Bad Account"}, "account", "lower-case segments"),
    ],
)
async def test_bad_input_is_refused_by_field_and_appends_nothing(
    client: AsyncClient, event_log: EventLog, fields: dict[str, object], field: str, words: str
) -> None:
    before = await event_log.last_seq()
    with pytest.raises(CommandError) as refused:
        await client.submit(spec(**fields))
    [problem] = refused.value.errors
    assert problem.field == field
    assert words in problem.message
    assert await event_log.last_seq() == before


async def test_a_malformed_request_names_the_field(
    client: AsyncClient, event_log: EventLog
) -> None:
    payload = b'{"spec": {"account": "a", "gpus": "two", "command": ["x"]}}'
    msg = await client.events.nc.request(client.subject(SUBMIT), payload, timeout=5)
    reply = msgspec.json.decode(msg.data)
    assert reply["errors"][0]["field"] == "gpus"
    assert reply["errors"][0]["value"] == '"two"'
    assert "Expected `int`" in reply["errors"][0]["message"]
    assert await event_log.last_seq() == 1


@pytest.mark.parametrize(
    ("payload", "field", "value", "words"),
    [
        (b'{"spec": {"account": "a", "gpus": 1, "command": ["x"], "priority": 5}}', "priority",
         "5", "no such field"),
        (b'{"spec": {"account": "a", "gpu_count": 1, "command": ["x"]}}', "gpu_count",
         "1", "did you mean 'gpus'?"),
        (b'{"spec": {"account": "a", "gpus": 1, "command": ["x"]}, "key": "k"}', "key",
         '"k"', "Accepted: spec, idempotency_key"),
    ],
)  # fmt: skip
async def test_a_field_no_request_has_is_refused_by_name_and_appends_nothing(
    client: AsyncClient, event_log: EventLog, payload: bytes, field: str, value: str, words: str
) -> None:
    before = await event_log.last_seq()
    msg = await client.events.nc.request(client.subject(SUBMIT), payload, timeout=5)
    [problem] = msgspec.json.decode(msg.data)["errors"]
    assert (problem["field"], problem["value"]) == (field, value)
    assert words in problem["message"]
    assert await event_log.last_seq() == before


async def test_cancel_appends_a_request_and_refuses_unknown_jobs(
    client: AsyncClient, event_log: EventLog, intake: Intake
) -> None:
    reply = await client.submit(spec())
    assert reply.job_id is not None
    await folded(intake)
    await client.cancel(reply.job_id)
    assert isinstance((await event_log.read())[-1].event, JobCancelRequested)
    before = await event_log.last_seq()
    with pytest.raises(CommandError, match="no such job"):
        await client.cancel("j-nope")
    assert await event_log.last_seq() == before


async def test_racing_retries_with_one_key_make_one_job(
    client: AsyncClient, event_log: EventLog
) -> None:
    replies = await asyncio.gather(
        *(client.submit(spec(), idempotency_key="race") for _ in range(20))
    )
    assert len({r.job_id for r in replies}) == 1
    assert sum(not r.duplicate for r in replies) == 1
    assert len(await submissions(event_log)) == 1


async def test_racing_submissions_of_different_jobs_under_one_key_make_one_job(
    client: AsyncClient, event_log: EventLog
) -> None:
    sent = [spec(gpus=1 + i % 2) for i in range(10)]
    results = await asyncio.gather(
        *(client.submit(s, idempotency_key="shared") for s in sent), return_exceptions=True
    )
    [event] = await submissions(event_log)
    for request, result in zip(sent, results, strict=True):
        if isinstance(result, CommandError):
            assert result.errors[0].field == "idempotency_key"
            assert request != event.spec
        else:
            # Whoever was told "accepted" holds a job with exactly the spec it sent.
            assert not isinstance(result, BaseException)
            assert result.job_id == event.job_id
            assert request == event.spec


async def test_a_submission_sees_an_account_the_log_holds_but_intake_has_not_folded(
    event_log: EventLog,
) -> None:
    # The ledger acknowledged the account before the submission was sent; the intake's
    # fold has not reached it yet. The intake catches up before it refuses anything.
    for path in ("lab", "lab/new"):
        await event_log.append(AccountDefined(meta=b.meta(), path=path, settings=AccountSettings()))
    service = Intake(event_log)
    apply_record(service.state, (await event_log.read(1, 1))[0])  # it knows "lab" only
    assert list(service.state.accounts) == ["lab"]
    payload = msgspec.json.encode(SubmitRequest(spec=spec(account="lab/new")))
    operator = Sender(principal="ops", operator=True)
    submitting = asyncio.create_task(service.submit(payload, operator))  # runs first: behind
    following = asyncio.create_task(service.run())
    try:
        reply = await submitting
    finally:
        following.cancel()
    assert reply.errors == []
    assert [e.spec.account for e in await submissions(event_log)] == ["lab/new"]


async def cordons(log: EventLog) -> list[NodeCordoned]:
    return [r.event for r in await log.read() if isinstance(r.event, NodeCordoned)]


async def test_a_drain_is_graceful_unless_asked_now_and_the_log_says_which(
    client: AsyncClient, event_log: EventLog
) -> None:
    await client.node_command(NodeCommandRequest(node_id="n1", action="cordon", drain=True))
    await client.node_command(
        NodeCommandRequest(node_id="n1", action="cordon", drain=True, now=True)
    )
    assert [(c.drain, c.now) for c in await cordons(event_log)] == [(True, False), (True, True)]


async def test_now_without_drain_is_refused_by_name_and_appends_nothing(
    client: AsyncClient, event_log: EventLog
) -> None:
    with pytest.raises(CommandError) as refused:
        await client.node_command(NodeCommandRequest(node_id="n1", action="cordon", now=True))
    [error] = refused.value.errors
    assert (error.field, error.value) == ("now", "true")
    assert "drain" in error.message
    assert await cordons(event_log) == []


async def test_several_submissions_in_one_request_are_each_answered_as_if_alone(
    client: AsyncClient, event_log: EventLog, intake: Intake
) -> None:
    await client.submit(spec(name="before"), idempotency_key="known")
    await folded(intake)
    sent = [
        SubmitRequest(spec=spec(name="a"), idempotency_key="a"),
        SubmitRequest(spec=spec(gpus=0), idempotency_key="zero"),  # refused alone
        SubmitRequest(spec=spec(name="before"), idempotency_key="known"),  # submitted before
        SubmitRequest(spec=spec(name="b"), idempotency_key="b"),
        SubmitRequest(spec=spec(name="b"), idempotency_key="b"),  # the same, twice
    ]
    payload = msgspec.json.encode(SubmitManyRequest(submissions=sent))
    msg = await client.events.nc.request(client.subject(SUBMIT_MANY), payload, timeout=5)
    replies = msgspec.json.decode(msg.data, type=SubmitManyReply).replies
    assert [bool(r.errors) for r in replies] == [False, True, False, False, False]
    assert replies[1].errors[0].field == "gpus"
    assert replies[2].duplicate
    assert replies[3].job_id == replies[4].job_id
    assert replies[4].duplicate
    names = [e.spec.name for e in await submissions(event_log)]
    assert sorted(names) == ["a", "b", "before"]
    assert replies[0].seq == replies[3].seq  # appended together
    # Each counted as if sent alone: what the metrics say of refusals and duplicates.
    counted = {
        (name, dict(labels).get("outcome") or dict(labels).get("field")): value
        for (name, labels), value in intake.commands.counts.counters.items()
        if dict(labels).get("command", "").endswith(SUBMIT_MANY)
    }
    assert counted == {
        (REQUESTS, "accepted"): 2, (REQUESTS, "duplicate"): 2, (REQUESTS, "refused"): 1,
        (REFUSALS, "gpus"): 1,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        (b'{"submissions": []}', "submissions"),
        (b'{"submissions": [{"spec": {"account": "a", "gpus": 1, "command": ["x"], "x": 1}}]}',
         "submissions[0].spec.x"),
        (b'{"jobs": []}', "jobs"),
    ],
)  # fmt: skip
async def test_a_malformed_request_of_several_is_refused_whole_by_field(
    client: AsyncClient, event_log: EventLog, payload: bytes, field: str
) -> None:
    before = await event_log.last_seq()
    msg = await client.events.nc.request(client.subject(SUBMIT_MANY), payload, timeout=5)
    reply = msgspec.json.decode(msg.data, type=SubmitManyReply)
    assert [e.field for e in reply.errors] == [field]
    assert reply.replies == []
    assert await event_log.last_seq() == before


async def test_submissions_asked_for_together_go_in_fewer_requests(
    client: AsyncClient, event_log: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[str] = []
    request = client._request

    async def counted(name: str, *args: Any, **options: Any) -> Any:
        sent.append(name)
        return await request(name, *args, **options)

    monkeypatch.setattr(client, "_request", counted)
    replies = await asyncio.gather(*(client.submit(spec(name=f"n{n}")) for n in range(200)))
    assert len({r.job_id for r in replies}) == 200
    assert SUBMIT_MANY in sent
    assert len(sent) < 200 / 4
    assert sorted(e.spec.name for e in await submissions(event_log)) == sorted(
        f"n{n}" for n in range(200)
    )


async def test_a_client_sends_alone_to_an_intake_that_takes_no_requests_of_several(
    nats_server: EmbeddedNats, event_log: EventLog
) -> None:
    await event_log.append(b.node("n1", 8))
    older = Intake(event_log)
    del older.commands._handlers[SUBMIT_MANY]  # as an intake before such requests
    running = asyncio.create_task(older.run())
    try:
        async with await AsyncClient.connect(nats_server.url) as c:
            await c.ready(timeout=10, services=("intake",))
            replies = await asyncio.gather(*(c.submit(spec(name=f"n{n}")) for n in range(20)))
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
    assert len({r.job_id for r in replies}) == 20
    assert len(await submissions(event_log)) == 20
