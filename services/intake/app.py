"""Request/reply on ``allot.cmd.submit`` and ``allot.cmd.cancel``.

Submissions that arrive together are appended together (``GroupCommit``, docs/adr/0036).
Idempotency: a submission with a key gets a job id derived from (sender, account, key). A
retry while the first is being stored waits for it; a later one is found in the folded log.
A submission appended alone carries that id as ``Nats-Msg-Id`` too, and the fold ignores a
second submission of a job id, so even two intakes racing append one job. Either way the
client gets the same job id back. Bad input is answered with field errors and appends
nothing.
"""

import argparse
import asyncio
import contextlib
import hashlib
import logging
import os

import msgspec
from opentelemetry import trace

from allot.bus.eventlog import Appended, EventLog
from allot.bus.tracing import JobTraces
from allot.core import (
    State,
    key_reused,
    known_submission,
    reason_too_long,
    validate_cancel,
    validate_submission,
)
from allot.core.authz import cancel_refusal, submit_refusal
from allot.proto import msgids
from allot.proto.commands import (
    CancelReply,
    CancelRequest,
    FieldError,
    NodeCommandReply,
    NodeCommandRequest,
    SubmitManyReply,
    SubmitManyRequest,
    SubmitReply,
    SubmitRequest,
)
from allot.proto.events import (
    ArraySubmitted,
    ArrayTasks,
    JobCancelRequested,
    JobSpec,
    JobSubmitted,
    NodeCordoned,
    NodeEvent,
    NodeUncordoned,
)
from allot.proto.limits import MAX_REASON
from allot.proto.subjects import ADMIN, CANCEL, NODE_COMMAND, SUBMIT, SUBMIT_MANY
from allot.services.commands import Commands, Lane
from allot.services.intake.batching import GroupCommit
from allot.services.replies import Sender, decode_request, not_stored
from allot.services.runtime import (
    Clock,
    Folded,
    event_span,
    follow_state,
    spec_attributes,
    stamp,
)

log = logging.getLogger("allot.intake")
Submitted = tuple[JobSpec, ArrayTasks | None]  # what a job id was submitted as
MAX_IN_FLIGHT = 256  # submissions being handled at once
CATCH_UP_S = 2.0  # how long a refused command waits for the log to be folded


def job_id_for(principal: str, account: str, idempotency_key: str | None) -> str:
    """A random id, or with a key, the same id for every retry of the sender's submission."""
    if idempotency_key is None:
        return "j-" + os.urandom(8).hex()
    named = f"{principal}\0{account}\0{idempotency_key}"
    return "j-" + hashlib.blake2b(named.encode(), digest_size=8).hexdigest()


class Intake:
    def __init__(self, events: EventLog, clock: Clock | None = None):
        self.events = events
        self.clock = clock or Clock()
        self.state = State()
        self.traces = JobTraces()  # a cancellation is part of the job's trace
        self.commands = Commands("intake", self.clock)
        # Submissions are handled many at once: those that arrive while one is stored are
        # appended together (``GroupCommit``). A retry of one in flight waits for it.
        submissions = Lane(at_once=MAX_IN_FLIGHT)
        for name in (SUBMIT, ADMIN + SUBMIT):
            self.commands.answer(name, self.submit, submissions)
        for name in (SUBMIT_MANY, ADMIN + SUBMIT_MANY):
            self.commands.answer(name, self.submit_many, submissions)
        control = Lane()  # cancels and node commands, one at a time
        for name in (CANCEL, ADMIN + CANCEL):
            self.commands.answer(name, self.cancel, control)
        self.commands.answer(NODE_COMMAND, self.node_command, control)
        self.appender = GroupCommit(events, self.clock)
        # Job (or array) id -> what is being appended or was, not yet folded, and where.
        self._appending: dict[str, tuple[Submitted, asyncio.Future[Appended]]] = {}
        self._unsure: set[str] = set()  # job ids whose append failed: stored or not?
        self._folded = Folded(self.state)

    async def run(self) -> None:
        try:
            await follow_state(
                self.events, self.state, self._on_caught_up, note=self.traces.note, snapshot=True
            )
        finally:
            await self.commands.close()
            await self.appender.close()

    async def _on_caught_up(self) -> None:
        await self._folded.announce()
        jobs, arrays = self.state.jobs, self.state.arrays
        for job_id in [j for j in self._appending if j in jobs or j in arrays]:
            del self._appending[job_id]  # folded: the idempotency index has it now
        if self._unsure:
            self._unsure = {j for j in self._unsure if j not in jobs and j not in arrays}
        # Answer commands only once the log has been read, so idempotency keys and the
        # node inventory are known.
        await self.commands.serve(self.events.nc, self.state.seq)

    async def submit(self, payload: bytes, sender: Sender) -> SubmitReply:
        request = decode_request(payload, SubmitRequest)
        if isinstance(request, FieldError):
            return SubmitReply(errors=[request])
        return await self._submit(request, sender)

    async def submit_many(self, payload: bytes, sender: Sender) -> SubmitManyReply:
        """Each submission taken as if sent alone, all at once: arriving together, they
        are appended together."""
        request = decode_request(payload, SubmitManyRequest)
        if isinstance(request, FieldError):
            return SubmitManyReply(errors=[request])
        taken = [self._submit(submission, sender) for submission in request.submissions]
        return SubmitManyReply(replies=list(await asyncio.gather(*taken)))

    async def _submit(self, request: SubmitRequest, sender: Sender) -> SubmitReply:
        errors = self._submission_problems(request, sender)
        if errors and await self._caught_up():
            errors = self._submission_problems(request, sender)
        known, key_errors = known_submission(request, sender.principal, self.state)
        if errors or key_errors:
            return SubmitReply(errors=errors + key_errors)
        if known is not None:
            return SubmitReply(job_id=known, duplicate=True)
        spec, key = request.spec, request.idempotency_key
        job_id = job_id_for(sender.principal, spec.account, key)
        if job_id in self._unsure:  # its append failed, maybe only to be acknowledged
            self._unsure.discard(job_id)
            await self._caught_up()  # if it was stored, the log has it now
            known, _ = known_submission(request, sender.principal, self.state)
            if known is not None:
                return SubmitReply(job_id=known, duplicate=True)
        trace.get_current_span().set_attributes(spec_attributes(job_id, spec))
        submitted = (spec, request.array)
        appending = self._appending.get(job_id)
        if appending is not None:  # the same key in flight: appended, not yet folded
            # For another spec: its client would take the first job for its own.
            if appending[0] != submitted:
                return SubmitReply(errors=[key_reused(key or "", job_id)])
            return await self._stored(job_id, appending[1], duplicate=True)
        event = JobSubmitted(
            meta=stamp("intake", self.clock),
            job_id=job_id,
            spec=spec,
            idempotency_key=key,
            by=sender.principal,
        )
        if request.array is not None:
            event = ArraySubmitted(**msgspec.structs.asdict(event), array=request.array)
        stored = self.appender.append(event)
        self._appending[job_id] = (submitted, stored)
        return await self._stored(job_id, stored, duplicate=False)

    async def _stored(
        self, job_id: str, stored: "asyncio.Future[Appended]", duplicate: bool
    ) -> SubmitReply:
        """The reply once the append of ``job_id`` is stored (or failed: then a retry with
        the same key appends it again)."""
        try:
            appended = await asyncio.shield(stored)
        except Exception as error:  # the client retries with the same key
            if self._appending.get(job_id, (None, None))[1] is stored:
                del self._appending[job_id]
                # Stored all the same, maybe, its acknowledgement lost: a batch has no
                # message id of the job's for the stream to drop a retry by.
                self._unsure.add(job_id)
            log.warning("append failed for %s: %s", job_id, error)
            return SubmitReply(errors=[not_stored(error)])
        duplicate = duplicate or appended.duplicate
        return SubmitReply(job_id=job_id, seq=appended.seq, duplicate=duplicate)

    def _submission_problems(self, request: SubmitRequest, sender: Sender) -> list[FieldError]:
        errors = validate_submission(request, self.state)
        account = request.spec.account
        refused = submit_refusal(self.state, sender.principal, sender.operator, account)
        return errors + ([refused] if refused else [])

    async def cancel(self, payload: bytes, sender: Sender) -> CancelReply:
        request = decode_request(payload, CancelRequest)
        if isinstance(request, FieldError):
            return CancelReply(job_id="", errors=[request])
        errors = self._cancel_problems(request, sender)
        if errors and await self._caught_up():
            errors = self._cancel_problems(request, sender)
        if errors:
            return CancelReply(job_id=request.job_id, errors=errors)
        event = JobCancelRequested(
            meta=stamp("intake", self.clock),
            job_id=request.job_id,
            reason=request.reason,
            by=sender.principal,
        )
        try:
            with event_span("intake", self.state, self.traces, event):
                appended = await self.events.append(
                    event, msg_id=msgids.cancellation(request.job_id)
                )
        except Exception as error:
            log.warning("append failed for cancel of %s: %s", request.job_id, error)
            return CancelReply(job_id=request.job_id, errors=[not_stored(error)])
        return CancelReply(job_id=request.job_id, seq=appended.seq)

    def _cancel_problems(self, request: CancelRequest, sender: Sender) -> list[FieldError]:
        errors = validate_cancel(request, self.state)
        if errors:
            return errors
        job = self.state.arrays.get(request.job_id) or self.state.jobs[request.job_id]
        refused = cancel_refusal(self.state, sender.principal, sender.operator, job)
        return [refused] if refused else []

    async def _caught_up(self) -> bool:
        """Before refusing a command, fold what the log already holds: the command may
        follow a write acknowledged elsewhere a moment ago (an account just applied, a job
        just submitted through another intake). Whether there was anything to fold."""
        try:
            target = await self.events.last_seq()
        except Exception as error:  # refuse on what is known
            log.warning("could not read the log's end: %s", error)
            return False
        if self.state.seq >= target:
            return False
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(CATCH_UP_S):
                await self._folded.reached(target)
        return True

    async def node_command(self, payload: bytes, sender: Sender) -> NodeCommandReply:
        """Cordon (and maybe drain) or uncordon a node the log knows."""
        request = decode_request(payload, NodeCommandRequest)
        if isinstance(request, FieldError):
            return NodeCommandReply(node_id="", errors=[request])
        if len(request.reason) > MAX_REASON:
            return NodeCommandReply(node_id="", errors=[reason_too_long(request.reason)])
        if request.now and not (request.action == "cordon" and request.drain):
            problem = FieldError(
                field="now",
                value="true",
                message="only with a cordon that drains (drain: true): it says how to drain",
            )
            return NodeCommandReply(node_id=request.node_id, errors=[problem])
        if request.node_id not in self.state.nodes:
            known = ", ".join(sorted(self.state.nodes)[:20]) or "none yet"
            problem = FieldError(
                field="node_id",
                value=request.node_id[:200],
                message=f"no such node; known: {known}",
            )
            return NodeCommandReply(node_id=request.node_id, errors=[problem])
        meta = stamp("intake", self.clock)
        event: NodeEvent
        if request.action == "cordon":
            event = NodeCordoned(
                meta=meta,
                node_id=request.node_id,
                drain=request.drain,
                reason=request.reason,
                by=sender.principal,
                now=request.now,
            )
        else:
            event = NodeUncordoned(meta=meta, node_id=request.node_id, by=sender.principal)
        try:
            appended = await self.events.append(event)
        except Exception as error:
            return NodeCommandReply(node_id=request.node_id, errors=[not_stored(error)])
        return NodeCommandReply(node_id=request.node_id, seq=appended.seq)


async def serve(args: argparse.Namespace, events: EventLog) -> None:
    await Intake(events).run()
