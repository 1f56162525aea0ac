"""Messages no honest writer sends, on the log and on the command subjects, against the
whole stack: nothing stops a service, nothing bad is stored, every request is answered."""

import asyncio
import json
import time
from pathlib import Path

import msgspec
import pytest

from allot.bus.codec import encode
from allot.client import AsyncClient
from allot.client.stack import Stack
from allot.core import JobStatus, State, apply_record
from allot.proto.commands import SubmitReply
from allot.proto.events import JobSpec, JobSubmitted, Meta
from allot.proto.subjects import SUBMIT
from tests import builders as b
from tests.stack import cli, gone, python, running, until

DEEP = b'{"type":"JobSubmitted","junk":' + b"[" * 1000 + b"]" * 1000 + b"}"


def alive(stack: Stack) -> list[str]:
    return sorted(
        name
        for name, child in stack.children.items()
        if child.process is not None and child.process.returncode is None
    )


async def folded(client: AsyncClient) -> State:
    state = State()
    for record in await client.events.read():
        apply_record(state, record)
    return state


async def test_poison_events_on_the_log_stop_no_service_and_no_reader(
    stack: Stack, client: AsyncClient, tmp_path: Path
) -> None:
    everyone = alive(stack)
    await client.events.js.publish("allot.evt.job.j-deep.JobSubmitted", DEEP)
    zero = JobSubmitted(
        meta=b.meta(), job_id="j-zero", spec=JobSpec(account="lab/a", gpus=0, command=["true"])
    )
    await client.events.append(zero)

    # Scheduling goes on: an ordinary job after them runs to its end.
    reply = await client.submit(JobSpec(account="lab/a", gpus=1, command=python("print(1)")))
    assert reply.job_id is not None
    job = await client.wait(reply.job_id, timeout=30)
    assert job.status == JobStatus.SUCCEEDED

    assert alive(stack) == everyone  # no restarts here: a crash would show
    state = await folded(client)
    assert "j-zero" not in state.jobs
    reasons = [i.reason for i in state.ignored if i.type == "JobSubmitted"]
    assert reasons[0].startswith("undecodable JobSubmitted: nested deeper than 32 levels")
    assert reasons[1].startswith("malformed: gpus='0'")

    exported = str(tmp_path / "log.jsonl")
    for args in (["status", "--json"], ["replay", "--verify"], ["log", "export", exported]):
        done = cli(stack, *args)
        assert done.returncode == 0, (args, done.stderr)
        assert "Traceback" not in done.stderr
        if args[0] == "status":
            assert "the fold ignored" in done.stderr


async def request(client: AsyncClient, subject: str, payload: bytes) -> dict[str, object]:
    msg = await client.events.nc.request(client.subject(subject), payload, timeout=10)
    reply: dict[str, object] = json.loads(msg.data)
    return reply


def submission(**fields: object) -> bytes:
    spec = {"account": "lab/a", "gpus": 1, "command": ["true"], **fields}
    return json.dumps({"spec": spec}).encode()


def just_below_the_payload_limit() -> bytes:
    """A submission whose event (the spec, an envelope, a job id) is just below NATS's
    payload limit, so that only its headers take it over: the size that once made the
    server close the intake's connection."""
    spec = JobSpec(account="lab/a", gpus=1, command=["python", ""])
    meta = Meta(id="0" * 32, at=time.time_ns(), producer="intake")
    event = JobSubmitted(meta=meta, job_id="j-" + "0" * 16, spec=spec)
    filler = (1 << 20) - 16 - len(encode(event))
    return submission(command=["python", "x" * filler])


@pytest.mark.parametrize(
    ("payload", "field", "says"),
    [
        (just_below_the_payload_limit(), "request", "at most 262144"),
        (submission(command=["python", "x" * 200_000]), "command", "at most 131072 bytes"),
        (b'{"spec":' + b"[" * 1000 + b"]" * 1000 + b"}", "request", "nested deeper"),
        (submission(cpus=2**63 - 1), "cpus", "0 to 65536 per worker"),
        (submission(memory_mib=2**64), "memory_mib", ""),
        (submission(gpus=1e308), "gpus", "Expected `int`"),
        (b"\xff\xfe not json", "request", ""),
    ],
    ids=["1MB", "200KB-argv", "nesting", "cpus", "memory-2^64", "gpus-float", "garbage"],
)
async def test_a_hostile_submission_is_answered_and_stores_nothing(
    stack: Stack, client: AsyncClient, payload: bytes, field: str, says: str
) -> None:
    everyone = alive(stack)
    before = await client.events.last_seq()
    reply = msgspec.convert(await request(client, SUBMIT, payload), SubmitReply)
    assert reply.job_id is None
    assert [e.field for e in reply.errors] == [field]
    assert says in reply.errors[0].message
    assert len(msgspec.json.encode(reply)) < 4096  # an error never echoes the payload
    appended = await client.events.read(before + 1)
    assert [r.type for r in appended if r.subject.startswith("allot.evt.job.")] == []
    assert alive(stack) == everyone


async def test_oversized_requests_cost_no_ordinary_submission(
    stack: Stack, client: AsyncClient
) -> None:
    # Each of these once made the intake build an event over NATS's payload limit: the
    # server closed its connection, failing every submission in flight with it.
    everyone = alive(stack)
    big = just_below_the_payload_limit()

    async def ordinary(number: int) -> SubmitReply:
        await asyncio.sleep(number * 0.01)
        spec = JobSpec(account="lab/a", gpus=1, command=["true"], name=f"ordinary-{number}")
        return await client.submit(spec, attempts=1)

    async def oversized(number: int) -> dict[str, object]:
        await asyncio.sleep(number * 0.08)
        return await request(client, SUBMIT, big)

    answers = await asyncio.gather(
        *(oversized(n) for n in range(5)), *(ordinary(n) for n in range(40))
    )
    refused, replies = answers[:5], answers[5:]
    assert all(isinstance(r, dict) and r["errors"] for r in refused)
    assert [r.errors for r in replies if isinstance(r, SubmitReply) and r.errors] == []
    assert alive(stack) == everyone


async def test_a_quarantined_job_is_undone_everywhere_and_replay_agrees(
    stack: Stack, client: AsyncClient
) -> None:
    # Well-formed, so the fold takes it: only an operator can say it should not have been.
    forged = JobSubmitted(
        meta=b.meta(),
        job_id="j-forged",
        spec=JobSpec(account="lab/a", gpus=4, command=python("import time; time.sleep(600)")),
    )
    appended = await client.events.append(forged)
    state = await until(client, lambda s: running(s, "j-forged"))
    pid = state.jobs["j-forged"].started_on["node-1"]

    done = cli(stack, "log", "quarantine", str(appended.seq), "--reason", "forged")
    assert done.returncode == 0, done.stderr
    assert f"JobSubmitted at sequence {appended.seq} quarantined" in done.stdout
    await gone(pid, timeout=20)  # the node agent's fold no longer gives it the job

    reply = await client.submit(JobSpec(account="lab/a", gpus=4, command=python("print(1)")))
    assert reply.job_id is not None
    assert (await client.wait(reply.job_id, timeout=30)).status == JobStatus.SUCCEEDED
    verified = cli(stack, "replay", "--verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    status = cli(stack, "status", "--json")
    assert "j-forged" not in status.stdout
    assert alive(stack) == sorted(stack.children)
