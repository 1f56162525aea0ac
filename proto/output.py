"""Reading a job's output: a request to the node agent that ran the job's process there,
on ``allot.output.<node>.<principal>`` (``allot.proto.subjects.output_request``).

A job's process writes its stdout and stderr to one file on its node; that file can be
large and grows fast, so it never enters the log (DESIGN rule 5). A reader asks for a
piece of it at a time, from an offset, and asks again from the ``next_offset`` of the
reply: following a running job is asking until ``ended`` and nothing is left.
"""

from typing import Annotated, Final

import msgspec

from allot.proto.commands import FieldError
from allot.proto.subjects import MAX_ID

MAX_OUTPUT_BYTES: Final = 256 << 10  # of one reply's data: its base64 stays far below 1 MiB
DEFAULT_OUTPUT_BYTES: Final = 64 << 10
MAX_ATTEMPT: Final = 1 << 20  # a job requeued more often than this is not a job any more
MAX_OFFSET: Final = 1 << 53  # bytes into a file: any real one, and exact in every JSON reader
JOB_ID_PATTERN: Final = r"^[A-Za-z0-9_-]+$"

ATTEMPT: Final = "the job's attempt: 0, then one more after each requeue; none: its latest"
JobId = Annotated[
    str,
    msgspec.Meta(
        description="the job's id",
        extra_json_schema={"minLength": 1, "maxLength": MAX_ID, "pattern": JOB_ID_PATTERN},
    ),
]


class OutputRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A piece of the output of ``job_id``'s process on the node asked, from ``offset``."""

    job_id: JobId
    attempt: Annotated[int, msgspec.Meta(ge=0, le=MAX_ATTEMPT, description=ATTEMPT)] | None = None
    offset: Annotated[int, msgspec.Meta(ge=0, le=MAX_OFFSET)] = 0
    max_bytes: Annotated[int, msgspec.Meta(ge=1, le=MAX_OUTPUT_BYTES)] = DEFAULT_OUTPUT_BYTES


class OutputReply(msgspec.Struct, frozen=True, kw_only=True):
    """``data`` (base64 in JSON) is the output from ``offset`` to ``next_offset``; ``size``
    is how much there was when it was read. ``ended``: the process had exited before the
    read, so whatever is not read yet is all there will be."""

    job_id: str = ""
    node_id: str = ""
    attempt: int = 0
    offset: int = 0
    data: bytes = b""
    next_offset: int = 0
    size: int = 0
    ended: bool = False
    errors: list[FieldError] = []
