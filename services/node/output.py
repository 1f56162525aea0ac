"""The node agent's answers to requests for a job's output (``allot.proto.output``).

Who may read a job's output is decided by ``allot.core.authz`` from the agent's own fold
of the log; who asks, by the subject, which the NATS server lets each identity send only
under its own name. A request is answered only where its reply goes to the asker's own
inbox: the agent may append to the log, and must not publish its answer there.

The file is read in a thread, a bounded piece at a time, and opened without following a
link at any step below the work directory: a job's process runs in its directory and
could put a link to anywhere in the place of its output.
"""

import asyncio
import errno
import logging
import os
import stat
from collections.abc import Callable
from pathlib import Path

import msgspec
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from allot.core import State
from allot.core.authz import output_refusal
from allot.proto.commands import FieldError
from allot.proto.output import OutputReply, OutputRequest
from allot.proto.subjects import (
    IMPORTED_REPLY,
    inbox_prefix,
    is_id,
    output_asker,
    output_requests,
)
from allot.services.replies import Sender, decode_request, refusal, respond

log = logging.getLogger("allot.node.output")
OUTPUT_FILE = "output.log"
# Requests wait at most this many deep: each is answered in well under a millisecond of
# the agent's own time, and a flood beyond it is dropped by the client library.
MAX_WAITING = 256


class Piece(msgspec.Struct, frozen=True):
    data: bytes
    size: int


class NoOutput(Exception):
    """The attempt left no output file here, or it is no plain file."""


def read_piece(work_dir: Path, job_id: str, attempt: int, offset: int, max_bytes: int) -> Piece:
    """Up to ``max_bytes`` of the output of ``job_id``'s attempt from ``offset``, and the
    file's size. Every step from ``work_dir`` is opened without following links."""
    no_follow = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    # Non-blocking: a FIFO in the place of the output must not hold the reading thread.
    steps = [(name, no_follow | os.O_DIRECTORY) for name in ("jobs", job_id, str(attempt))]
    steps.append((OUTPUT_FILE, no_follow | os.O_NONBLOCK))
    fd = os.open(work_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name, flags in steps:
            inner = _open_in(fd, name, flags)
            os.close(fd)
            fd = inner
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NoOutput(f"its {OUTPUT_FILE} is no plain file")
        data = os.pread(fd, max_bytes, offset) if offset < info.st_size else b""
        return Piece(data, max(info.st_size, offset + len(data)) if data else info.st_size)
    finally:
        os.close(fd)


def _open_in(directory: int, name: str, flags: int) -> int:
    try:
        return os.open(name, flags, dir_fd=directory)
    except OSError as error:
        if error.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
            raise NoOutput(f"no {OUTPUT_FILE} here") from None
        raise


class OutputServer:
    """Answers ``allot.output.<node>.…`` for the jobs whose processes ran on this node."""

    def __init__(
        self,
        node_id: str,
        work_dir: Path,
        state: State,
        ended: Callable[[str, int], bool],
    ):
        self.node_id = node_id
        self.work_dir = work_dir
        self.state = state  # the agent's fold, which it keeps current
        self.ended = ended  # whether the process of a job's attempt here has exited

    async def subscribe(self, nc: NATS) -> Subscription:
        return await nc.subscribe(
            output_requests(self.node_id), cb=self._on_request, pending_msgs_limit=MAX_WAITING
        )

    async def _on_request(self, msg: Msg) -> None:
        asker = self._asker(msg)
        if asker is None:
            return
        try:
            reply = await self.reply_to(msg.data, asker)
        except Exception as error:  # a bug must cost neither the agent nor the reply
            log.exception("answering a request for output failed")
            await respond(msg, refusal("request", "", f"the node agent failed on it: {error!r}"))
            return
        await respond(msg, reply)

    def _asker(self, msg: Msg) -> Sender | None:
        """Who asks, or None for a message whose reply would not go to the asker."""
        asked = output_asker(msg.subject, self.node_id)
        if asked is None:
            return None
        principal, operator = asked
        if not msg.reply.startswith((inbox_prefix(principal) + ".", IMPORTED_REPLY)):
            return None
        return Sender(principal=principal, operator=operator)

    async def reply_to(self, payload: bytes, asker: Sender) -> OutputReply:
        request = decode_request(payload, OutputRequest)
        if isinstance(request, FieldError):
            return OutputReply(errors=[request])
        job_id = request.job_id
        if not is_id(job_id):
            return self._refused(
                job_id, "job_id", "a job id is 1 to 128 letters, digits, '_' or '-'"
            )
        job = self.state.jobs.get(job_id)
        if job is None:
            return self._refused(job_id, "job_id", f"no such job in the log {self.node_id} read")
        if problem := output_refusal(self.state, asker.principal, asker.operator, job):
            return OutputReply(job_id=job_id, node_id=self.node_id, errors=[problem])
        attempt = job.attempts if request.attempt is None else request.attempt
        if attempt > job.attempts:
            return self._refused(
                job_id, "attempt", f"{job_id} has had attempts 0 to {job.attempts}", attempt
            )
        ended = self.ended(job_id, attempt)  # before the read: then all of it is there
        try:
            piece = await asyncio.to_thread(
                read_piece, self.work_dir, job_id, attempt, request.offset, request.max_bytes
            )
        except NoOutput as error:
            message = f"attempt {attempt} of {job_id} left no output on {self.node_id}: {error}"
            return self._refused(job_id, "job_id", message)
        return OutputReply(
            job_id=job_id,
            node_id=self.node_id,
            attempt=attempt,
            offset=request.offset,
            data=piece.data,
            next_offset=request.offset + len(piece.data),
            size=piece.size,
            ended=ended,
        )

    def _refused(self, job_id: str, field: str, message: str, value: object = None) -> OutputReply:
        shown = job_id if value is None else str(value)
        return OutputReply(
            job_id=job_id,
            node_id=self.node_id,
            errors=[FieldError(field=field, value=shown, message=message)],
        )
