"""``AsyncClient``: submit, cancel, watch and inspect jobs from any asyncio program.

Submissions always carry an idempotency key (one is made up if the caller gives none), so
the client can retry a request whose reply was lost without ever submitting twice. Views of
the cluster are the log folded by ``allot.core``, exactly as the services fold it.
"""

import asyncio
import contextlib
import os
import ssl
from collections.abc import AsyncGenerator, Callable
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import nats
from nats.aio.msg import Msg
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout

from allot.bus import traced
from allot.bus.eventlog import EventLog, Record
from allot.bus.identity import Identity, IdentityError, connect_options, load
from allot.bus.tls import TlsError, from_environment
from allot.bus.urls import servers
from allot.client import sending
from allot.client.sending import (
    CANCEL_ATTEMPTS,
    CANCEL_TIMEOUT_S,
    PUBLISH_REFUSED,
    SERVICE_OF,
    SUBMIT_ATTEMPTS,
    SUBMIT_TIMEOUT_S,
    CommandError,
    NoAnswer,
    PayloadTooLarge,
    Retries,
    WaitTimedOut,
    done_already,
    local_principal,
    not_admitted,
    not_allowed,
    retryable,
    untrusted,
)
from allot.client.together import Together
from allot.core.model import JobRecord, JobStatus, State
from allot.core.ranks import Process, process_of_worker
from allot.proto.commands import (
    AccountsApplyReply,
    AccountsApplyRequest,
    BudgetGrantReply,
    BudgetGrantRequest,
    CancelReply,
    CancelRequest,
    FieldError,
    NodeCommandReply,
    NodeCommandRequest,
    SubmitManyReply,
    SubmitReply,
)
from allot.proto.events import ArrayTasks, JobSpec
from allot.proto.limits import MAX_REQUEST_BYTES
from allot.proto.output import DEFAULT_OUTPUT_BYTES, OutputReply, OutputRequest
from allot.proto.queries import JOB, Answer, JobQuery
from allot.proto.subjects import (
    ACCOUNTS_APPLY,
    BUDGET_GRANT,
    CANCEL,
    MIRROR,
    NODE_COMMAND,
    READERS_API,
    SUBMIT,
    SUBMIT_MANY,
    StreamSettings,
    command,
    health,
    job_subjects,
    output_request,
)

R = TypeVar(
    "R",
    SubmitReply,
    SubmitManyReply,
    CancelReply,
    AccountsApplyReply,
    BudgetGrantReply,
    NodeCommandReply,
    Answer,
)


class AsyncClient:
    """Commands are sent as ``principal``; an operator's under ``admin.`` (docs/adr/0015)."""

    def __init__(
        self,
        events: EventLog,
        principal: str,
        operator: bool,
        denied: dict[str, asyncio.Event] | None = None,
    ):
        self.events = events
        self.principal = principal
        self.operator = operator
        # Subjects the server refused this connection, as its error callback hears them.
        self._denied = denied if denied is not None else {}
        self._together = Together(
            self._submit_alone, self._submit_many, again=_sent_again, room=self._request_room
        )
        self._alone_only = False  # the intake takes no requests of several, or may not

    @classmethod
    async def connect(
        cls, url: str, identity: Identity | None = None, tls: ssl.SSLContext | None = None
    ) -> "AsyncClient":
        """Connect as ``identity``, else as the one ``$ALLOT_IDENTITY`` names, else (to a
        server without authorization) as the local user, who may then do anything. Over
        ``tls``, else over the TLS ``$ALLOT_TLS_CA`` describes, if any (``allot.bus.tls``)."""
        if identity is None and os.environ.get("ALLOT_IDENTITY"):
            identity = load(Path(os.environ["ALLOT_IDENTITY"]))
        tls = tls if tls is not None else from_environment()
        principal = identity.name if identity is not None else local_principal()
        denied: dict[str, asyncio.Event] = {}
        unknown: list[Exception] = []
        handshake: asyncio.Future[ssl.SSLError] = asyncio.get_running_loop().create_future()

        async def on_error(error: Exception) -> None:
            refused = PUBLISH_REFUSED.search(str(error))
            if refused:
                denied.setdefault(refused[1], asyncio.Event()).set()
            elif "authorization violation" in str(error).lower():
                unknown.append(error)
            elif isinstance(error, ssl.SSLError) and not handshake.done():
                handshake.set_result(error)

        connecting = asyncio.ensure_future(
            nats.connect(
                servers(url),
                name="allot-client",
                max_reconnect_attempts=3,
                error_cb=on_error,
                **connect_options(principal, identity, tls),
            )
        )
        try:
            # A failed TLS handshake is not retried to an end: nats.connect would wait on.
            either: list[asyncio.Future[Any]] = [connecting, handshake]
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            if not connecting.done():
                connecting.cancel()
                raise TlsError(untrusted(url, handshake.result(), tls))
            nc = connecting.result()
        except nats.errors.NoServersError:
            if not unknown:
                raise
            raise IdentityError(not_admitted(url, principal, identity is not None)) from None
        # A user reads the mirror in the users' account, directly; everyone else, the log.
        user = identity is not None and identity.role == "user"
        mirror = StreamSettings(name=MIRROR)
        events = EventLog(nc, mirror, direct=True, api=READERS_API) if user else EventLog(nc)
        return cls(events, principal, identity.operator if identity else True, denied)

    async def close(self) -> None:
        await self.events.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def submit(
        self,
        spec: JobSpec,
        *,
        idempotency_key: str | None = None,
        array: ArrayTasks | None = None,
        timeout: float = SUBMIT_TIMEOUT_S,
        attempts: int = SUBMIT_ATTEMPTS,
    ) -> SubmitReply:
        """Submit a job, or with ``array`` a job array (the reply's id names the array).
        Submissions made while earlier ones are on their way go in one request."""
        payload = sending.submission(spec, idempotency_key, array)
        # The job's trace begins here (or in the caller's span, if there is one).
        with traced.client_span("allot.submit", sending.submit_span(spec)) as span:
            told = (timeout, attempts) != (SUBMIT_TIMEOUT_S, SUBMIT_ATTEMPTS)
            if told or self._alone_only or traced.carry({}):
                # A trace travels in the request's headers, one per request: alone.
                reply = await self._request(SUBMIT, payload, SubmitReply, timeout, attempts)
            else:  # with others asked for meanwhile, maybe
                reply = await self._together.submit(payload)
            if span is not None and reply.job_id is not None:
                span.set_attribute("allot.job.id", reply.job_id)
        if reply.errors:
            raise CommandError(reply.errors)
        return reply

    async def _submit_alone(self, payload: bytes) -> SubmitReply:
        return await self._request(SUBMIT, payload, SubmitReply, SUBMIT_TIMEOUT_S, SUBMIT_ATTEMPTS)

    async def _submit_many(self, payloads: list[bytes]) -> list[SubmitReply] | None:
        """Submissions in one request, each answered as if sent alone; None where they are
        to be sent alone instead: the request as a whole was refused (one of them is
        malformed, and each is to be told its own error), or is too large for this
        server, or the intake takes no such requests, or this identity may not send them
        (a server configured before there were any)."""
        body = b'{"submissions":[' + b",".join(payloads) + b"]}"
        try:
            together = await self._request(
                SUBMIT_MANY, body, SubmitManyReply, SUBMIT_TIMEOUT_S, SUBMIT_ATTEMPTS
            )
        except NoAnswer as error:
            if error.timeout is not None:  # nobody answered in time: neither would alone
                raise
            self._alone_only = True  # an intake from before such requests
            return None
        except CommandError:  # the server does not let this identity send them
            self._alone_only = True
            return None
        except PayloadTooLarge:
            return None
        if together.errors or len(together.replies) != len(payloads):
            return None
        return together.replies

    def _request_room(self) -> int:
        """The bytes a request may take: the intake's limit, or the server's if lower."""
        return min(MAX_REQUEST_BYTES, self.events.nc.max_payload)

    async def cancel(
        self, job_id: str, reason: str = "", timeout: float = CANCEL_TIMEOUT_S
    ) -> CancelReply:
        payload = msgspec.json.encode(CancelRequest(job_id=job_id, reason=reason))
        reply = await self._request(
            CANCEL, payload, CancelReply, timeout, CANCEL_ATTEMPTS, retried=done_already
        )
        if reply.errors:
            raise CommandError(reply.errors)
        return reply

    async def node_command(self, request: NodeCommandRequest) -> NodeCommandReply:
        """Cordon, drain or uncordon a node. Retrying is harmless: the state is the same."""
        payload = msgspec.json.encode(request)
        reply = await self._request(NODE_COMMAND, payload, NodeCommandReply, 5.0, 3)
        if reply.errors:
            raise CommandError(reply.errors)
        return reply

    async def apply_accounts(
        self, accounts: dict[str, dict[str, Any]], timeout: float = 10.0
    ) -> AccountsApplyReply:
        """Make the account tree equal to ``accounts`` (path -> settings as in a file)."""
        payload = msgspec.json.encode(AccountsApplyRequest(accounts=accounts))
        reply = await self._request(ACCOUNTS_APPLY, payload, AccountsApplyReply, timeout, 3)
        if reply.errors:
            raise CommandError(reply.errors)
        return reply

    async def grant_budget(self, request: BudgetGrantRequest) -> BudgetGrantReply:
        payload = msgspec.json.encode(request)
        # Not retried: a grant has no natural id, and a lost reply is visible in the log.
        reply = await self._request(BUDGET_GRANT, payload, BudgetGrantReply, 10.0, 1)
        if reply.errors:
            raise CommandError(reply.errors)
        return reply

    async def query(self, name: str, request: msgspec.Struct, timeout: float = 10.0) -> Answer:
        """Ask the read model (``allot.proto.queries``); its answer names the sequence of
        the log it is true at, which is at least the log's end as this client saw it when
        it asked (unless the query says otherwise). Raises ``CommandError`` for a question
        it refused."""
        if not getattr(request, "at_least", 0):
            request = msgspec.structs.replace(request, at_least=await self.events.last_seq())
        payload = msgspec.json.encode(request)
        subject = command(self.principal, name)  # the same for operators and users
        answer = await self._request(name, payload, Answer, timeout, 3, subject)
        if answer.errors:
            raise CommandError(answer.errors)
        return answer

    async def output(
        self,
        job_id: str,
        *,
        rank: int = 0,
        offset: int = 0,
        attempt: int | None = None,
        max_bytes: int = DEFAULT_OUTPUT_BYTES,
        node_id: str | None = None,
        timeout: float = 5.0,
    ) -> OutputReply:
        """A piece of the output of the process that runs worker ``rank`` of ``job_id``,
        from ``offset``, asked of the agent of its node (``node_id``, else the node the
        log places that worker on now). Raises ``CommandError`` where the agent refuses
        (a job of somebody else's, no output there) and ``NoRespondersError`` where no
        agent of that node answers."""
        if node_id is None:
            job, process = await self.process_of(job_id, rank)
            if job is None:
                no_job = FieldError(field="job_id", value=job_id, message="no such job")
                raise CommandError([no_job])
            if process is None:
                where = f"{job_id} has no worker {rank} placed now"
                raise CommandError([FieldError(field="rank", value=str(rank), message=where)])
            node_id = process.node_id
            attempt = job.attempts if attempt is None else attempt
        request = OutputRequest(job_id=job_id, attempt=attempt, offset=offset, max_bytes=max_bytes)
        subject = output_request(node_id, self.principal, self.operator)
        msg = await self._request_once(subject, msgspec.json.encode(request), timeout)
        reply = msgspec.json.decode(msg.data, type=OutputReply)
        if reply.errors:
            raise CommandError(reply.errors)
        return reply

    async def process_of(self, job_id: str, rank: int) -> tuple[JobRecord | None, Process | None]:
        """The job as the read model says now, and the process that runs its worker ``rank``
        (None while it is placed nowhere)."""
        job = await self.job(job_id)
        return job, None if job is None else process_of_worker(job, rank)

    async def ready(
        self, timeout: float = 30.0, services: tuple[str, ...] = ("intake", "ledger")
    ) -> None:
        """Wait until the command services answer (they do once they have read the log)."""
        deadline = asyncio.get_running_loop().time() + timeout
        for subject in map(health, services):
            while True:
                try:
                    await self.events.nc.request(subject, b"", timeout=1.0)
                    break
                except (NoRespondersError, NatsTimeout):
                    if asyncio.get_running_loop().time() > deadline:
                        raise TimeoutError(f"nothing answered on {subject}") from None
                    await asyncio.sleep(0.1)

    def subject(self, name: str) -> str:
        """The subject this client sends the command ``name`` on."""
        return sending.subject(self.principal, self.operator, name)

    async def _request(
        self,
        name: str,
        payload: bytes,
        reply_type: type[R],
        timeout: float,
        attempts: int,
        subject: str | None = None,
        retried: Callable[[R], R] | None = None,
    ) -> R:
        """``retried``: what a reply to a request sent again means, where an earlier try
        that was stored but whose answer was lost changes the answer."""
        subject = subject or self.subject(name)
        limit = self.events.nc.max_payload
        if len(payload) > limit:  # nats-py would say only "maximum payload exceeded"
            raise PayloadTooLarge(name, len(payload), limit)
        clock = asyncio.get_running_loop().time
        retries = Retries(attempts, timeout, clock())
        while True:
            try:
                msg = await self._request_once(subject, payload, timeout)
            except (NoRespondersError, NatsTimeout) as error:
                delay = retries.after_silence()
                if delay is None:
                    waited = None if isinstance(error, NoRespondersError) else timeout
                    raise NoAnswer(SERVICE_OF[name], subject, waited) from None
                await asyncio.sleep(delay)
                continue
            reply: R = msgspec.json.decode(msg.data, type=reply_type)
            delay = retries.after_reply(getattr(reply, "errors", []), clock())
            if delay is not None:
                await asyncio.sleep(delay)
                continue
            return retried(reply) if retried is not None and retries.attempt > 0 else reply

    async def _request_once(self, subject: str, payload: bytes, timeout: float) -> Msg:
        """One request, or the server's refusal to let this identity send it (it says so
        only to the error callback: the request itself would just go unanswered)."""
        denied = self._denied.setdefault(subject.lower(), asyncio.Event())
        denied.clear()
        headers = traced.carry({}) or None
        request = asyncio.ensure_future(
            self.events.nc.request(subject, payload, timeout=timeout, headers=headers)
        )
        refusal = asyncio.ensure_future(denied.wait())
        try:
            done, _ = await asyncio.wait({request, refusal}, return_when=asyncio.FIRST_COMPLETED)
        finally:  # whatever ends the wait, neither is left running
            refusal.cancel()
            request.cancel()
        if request not in done:
            raise CommandError([not_allowed(self.principal, subject)])
        return request.result()

    async def state(self) -> State:
        """The whole log, folded."""
        from allot.core.fold import apply_record  # the fold: only for those who fold

        state = State()
        records = await self.events.read()
        for record in records:
            apply_record(state, record, records)
        return state

    async def job(self, job_id: str, at_least: int = 0) -> JobRecord | None:
        """The job as the read model has it, folded at least up to ``at_least`` (default:
        the log's end now); None if the log holds no such job."""
        try:
            answer = await self.query(JOB, JobQuery(job_id=job_id, at_least=at_least))
        except CommandError as error:
            if [e.field for e in error.errors] == ["job_id"]:
                return None
            raise
        if "array" in answer.data:
            problem = FieldError(field="job_id", value=job_id, message="a job array, not a job: "
                                 f"name one of its tasks ({job_id}_INDEX)")  # fmt: skip
            raise CommandError([problem])
        return msgspec.convert(answer.data, JobRecord, strict=False)

    async def wait(self, job_id: str, timeout: float | None = None) -> JobRecord:
        """Wait until the job has ended; its final record. Past ``timeout`` seconds,
        WaitTimedOut says where the job was."""
        seen: JobRecord | None = None
        try:
            async with asyncio.timeout(timeout):
                async with contextlib.aclosing(self.job_updates(job_id)) as updates:
                    async for seen in updates:
                        if seen is not None and seen.status.terminal:
                            return seen
        except TimeoutError:
            assert timeout is not None
            status = "unknown to the log" if seen is None else str(seen.status)
            raise WaitTimedOut(job_id, status, timeout) from None
        raise AssertionError("unreachable")

    async def wait_array(self, array_id: str, timeout: float | None = None) -> dict[str, Any]:
        """Wait until every task of the job array has ended; the array at a glance
        (``render.array_view``). Asked every ``WAIT_POLL_S``: its tasks' events are many."""
        view: dict[str, Any] = {}
        try:
            async with asyncio.timeout(timeout):
                while True:
                    view = (await self.query(JOB, JobQuery(job_id=array_id))).data["array"]
                    if not set(view["by_status"]) - TERMINAL_STATES:
                        return view
                    await asyncio.sleep(WAIT_POLL_S)
        except TimeoutError:
            assert timeout is not None
            raise WaitTimedOut(array_id, str(view.get("by_status", "unknown")), timeout) from None

    async def job_updates(self, job_id: str) -> AsyncGenerator[JobRecord | None, None]:
        """The job as the read model has it now (None: not in the log yet), then again
        whenever an event under the job's subjects is appended, and every ``WAIT_POLL_S``
        (a node lost ends its jobs by an event of the node). Nothing folds the log here."""
        start = await self.events.last_seq()
        latest = [start]  # the last event of the job seen appended
        moved = asyncio.Event()

        async def watch() -> None:
            async for record in self.events.follow(start + 1, job_subjects(job_id)):
                latest[0] = record.seq
                moved.set()

        watching = asyncio.create_task(watch())
        try:
            yield await self.job(job_id, start)
            while True:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(moved.wait(), WAIT_POLL_S)
                moved.clear()
                yield await self.job(job_id, latest[0])
        finally:
            watching.cancel()
            # It only says when to ask again: its failing changes no answer.
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await watching

    async def states(self) -> AsyncGenerator[State, None]:
        """The folded state after every event, from the start of the log, then live."""
        from allot.core.fold import apply_record, refold

        state = State()
        if await self.events.last_seq() == 0:
            yield state
        async with contextlib.aclosing(self.events.follow(1)) as records:
            async for record in records:
                apply_record(state, record)
                if state.refold_due:
                    state.become(refold(state, await self.events.read(1, state.seq)))
                yield state

    async def tail(self, count: int) -> list[Record]:
        last = await self.events.last_seq()
        return await self.events.read(max(1, last - count + 1), last)


WAIT_POLL_S = 1.0  # how often ``wait`` asks again when none of the job's events came
TERMINAL_STATES = frozenset(str(s) for s in JobStatus if s.terminal)


def _sent_again(reply: SubmitReply) -> bool:
    """Whether a submission answered in a request of several is to be sent again, alone:
    the log could not store it for now, and one sent alone would be tried again."""
    return retryable(reply.errors)
