"""Request/reply on ``allot.cmd.submit`` and ``allot.cmd.cancel``.

Idempotency: a submission with a key gets a job id derived from (account, key) and that id
as ``Nats-Msg-Id``, so a retry inside the stream's duplicate window is dropped by the server;
a later retry is found in the folded log. Either way the client gets the same job id back
and nothing new is appended. Bad input is answered with field errors and appends nothing.
"""

import argparse
import asyncio
import hashlib
import logging
import re
import uuid

import msgspec
from allot.bus import tracing
from allot.bus.eventlog import EventLog
from allot.core import State, validate_cancel, validate_submission
from allot.proto.commands import CancelReply, CancelRequest, FieldError, SubmitReply, SubmitRequest
from allot.proto.events import JobCancelRequested, JobSubmitted
from allot.proto.subjects import CANCEL, HEALTH_INTAKE, SUBMIT
from allot.services.runtime import Clock, follow_state, stamp
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

log = logging.getLogger("allot.intake")
QUEUE_GROUP = "intake"
MAX_IN_FLIGHT = 256  # submissions being appended at once
_AT_PATH = re.compile(r"at `\$\.?([^`]*)`")


def job_id_for(account: str, idempotency_key: str | None) -> str:
    if idempotency_key is None:
        return "j-" + uuid.uuid4().hex[:16]
    digest = hashlib.blake2b(f"{account}\0{idempotency_key}".encode(), digest_size=8)
    return "j-" + digest.hexdigest()


class Intake:
    def __init__(self, events: EventLog, clock: Clock | None = None):
        self.events = events
        self.clock = clock or Clock()
        self.state = State()
        self._subscriptions: list[Subscription] = []
        self._in_flight = asyncio.Semaphore(MAX_IN_FLIGHT)
        self._tasks: set[asyncio.Task[None]] = set()

    async def run(self) -> None:
        await follow_state(self.events, self.state, self._on_caught_up)

    async def _on_caught_up(self) -> None:
        # Answer commands only once the log has been read, so idempotency keys and the
        # node inventory are known.
        if self._subscriptions:
            return
        nc = self.events.nc
        self._subscriptions = [
            await nc.subscribe(SUBMIT, queue=QUEUE_GROUP, cb=self._on_submit),
            await nc.subscribe(CANCEL, queue=QUEUE_GROUP, cb=self._on_cancel),
            await nc.subscribe(HEALTH_INTAKE, queue=QUEUE_GROUP, cb=self._on_health),
        ]
        log.info("caught up at sequence %d, accepting commands", self.state.seq)

    async def _on_health(self, msg: Msg) -> None:
        await msg.respond(b'{"ok":true}')

    async def _on_submit(self, msg: Msg) -> None:
        # Handled concurrently so appends overlap their acknowledgements. Safe for
        # retries: a key always maps to the same job id and message id, so the server
        # drops whichever of two racing appends comes second.
        await self._in_flight.acquire()
        task = asyncio.create_task(self._submit_and_reply(msg))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(lambda _: self._in_flight.release())

    async def _submit_and_reply(self, msg: Msg) -> None:
        with tracing.tracer.start_as_current_span(
            "intake.submit", context=tracing.extract(msg.headers)
        ):
            reply = await self.submit(msg.data)
        await msg.respond(msgspec.json.encode(reply))

    async def _on_cancel(self, msg: Msg) -> None:
        reply = await self.cancel(msg.data)
        await msg.respond(msgspec.json.encode(reply))

    async def submit(self, payload: bytes) -> SubmitReply:
        try:
            request = msgspec.json.decode(payload, type=SubmitRequest)
        except msgspec.DecodeError as error:
            return SubmitReply(errors=[decode_error(error)])
        errors = validate_submission(request, self.state)
        if errors:
            return SubmitReply(errors=errors)
        spec, key = request.spec, request.idempotency_key
        if key is not None:
            known = self.state.idempotency.get((spec.account, key))
            if known is not None:
                if self.state.jobs[known].spec != spec:
                    return SubmitReply(
                        errors=[
                            FieldError(
                                field="idempotency_key",
                                value=key,
                                message=f"already used for a different job ({known}); "
                                "use a new key for a new job",
                            )
                        ]
                    )
                return SubmitReply(job_id=known, duplicate=True)
        job_id = job_id_for(spec.account, key)
        event = JobSubmitted(
            meta=stamp("intake", self.clock), job_id=job_id, spec=spec, idempotency_key=key
        )
        try:
            appended = await self.events.append(event, msg_id=f"submit:{job_id}")
        except Exception as error:  # the client retries with the same key
            log.warning("append failed for %s: %s", job_id, error)
            return SubmitReply(
                errors=[FieldError(field="log", value="", message=f"not stored, retry: {error}")]
            )
        return SubmitReply(job_id=job_id, seq=appended.seq, duplicate=appended.duplicate)

    async def cancel(self, payload: bytes) -> CancelReply:
        try:
            request = msgspec.json.decode(payload, type=CancelRequest)
        except msgspec.DecodeError as error:
            return CancelReply(job_id="", errors=[decode_error(error)])
        errors = validate_cancel(request, self.state)
        if errors:
            return CancelReply(job_id=request.job_id, errors=errors)
        event = JobCancelRequested(
            meta=stamp("intake", self.clock), job_id=request.job_id, reason=request.reason
        )
        appended = await self.events.append(event)
        return CancelReply(job_id=request.job_id, seq=appended.seq)


def decode_error(error: msgspec.DecodeError) -> FieldError:
    """Turn msgspec's 'Expected `int`, got `str` - at `$.spec.gpus`' into a field error."""
    text = str(error)
    match = _AT_PATH.search(text)
    field = (match.group(1) if match else "") or "request"
    field = field.removeprefix("spec.")
    return FieldError(field=field, value="", message=text.split(" - at ")[0])


async def serve(args: argparse.Namespace, events: EventLog) -> None:
    await Intake(events).run()
