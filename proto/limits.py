"""The sizes Allot accepts, in one place, and the check that keeps JSON within them.

NATS refuses a message over its payload limit (1 MiB by default) and closes the connection
that sent it, so every event a service builds must stay below that, headers included. A
request is bounded well below it: the event it becomes adds an envelope and headers.

Deep nesting is refused before any decoder sees it: a decoder recurses per level, and
1,000 levels of ``[`` are enough to exhaust the interpreter's stack. No message of the
schema nests deeper than a handful of levels.
"""

from typing import Final

import msgspec

MAX_EVENT_BYTES: Final = 1 << 20  # the stream's max_msg_size and NATS's default payload
EVENT_HEADROOM_BYTES: Final = 16 << 10  # headers (trace context, ids) and the envelope
MAX_REQUEST_BYTES: Final = 256 << 10  # a command on allot.cmd.*
MAX_DEPTH: Final = 32  # levels of nested arrays and objects
SHOWN_CHARS: Final = 200  # of a value a reply repeats back

# What a job may ask for. The JSON Schema states these (``allot.proto.schema``) so that a
# publisher in any language can check before it sends; ``allot.core.validate`` enforces
# them with a message that names the field, the value and what is accepted.
# An account is a path in the account tree: org/program/project/team, lower-case segments.
ACCOUNT_PATTERN: Final = r"^[a-z0-9][a-z0-9_-]{0,62}(/[a-z0-9][a-z0-9_-]{0,62}){0,7}$"
ENV_NAME_PATTERN: Final = r"^[A-Za-z_][A-Za-z0-9_]*$"
MAX_NAME: Final = 128
MAX_KEY: Final = 256  # an idempotency key
MAX_REASON: Final = 1024  # a cancel's or a cordon's
MAX_FLAVOR: Final = 64
MAX_PATH: Final = 4096  # PATH_MAX
MAX_MIN_RUNTIME_NS: Final = 8 * 3600 * 10**9  # the runtime contract's cap (R13)
MAX_RUNTIME_NS: Final = 365 * 86400 * 10**9  # a year: longer is a typo, not a plan
MAX_GRACE_NS: Final = 3600 * 10**9
MAX_WORKERS: Final = 4096
MAX_GPUS_PER_WORKER: Final = 1024
MAX_CPUS: Final = 1 << 16  # per worker; the largest node's count is checked once nodes are known
MAX_MEMORY_MIB: Final = 1 << 30  # per worker (1 PiB); the same
# What a job's process is given to start: arguments and environment together. Linux takes
# at most 128 KiB for one string and about 2 MiB for all of them; a job that needs more
# belongs in a script file.
MAX_ARGS: Final = 4096
MAX_ENV: Final = 1024
MAX_ARGV_ENV_BYTES: Final = 128 << 10
# A job array: its tasks (each a job of its own in the log's fold), the ranges that name
# their indices, and the largest index. A larger sweep is several arrays.
MAX_ARRAY_TASKS: Final = 10_000
MAX_ARRAY_RANGES: Final = 1_000
MAX_ARRAY_INDEX: Final = 9_999_999
# Submissions intake appends as one event (docs/adr/0036): a handful of cycles' worth.
MAX_BATCH_JOBS: Final = 1024

_NOT_A_MARK = bytes(b for b in range(256) if b not in b'[]{}"')


def shown(value: object, chars: int = SHOWN_CHARS) -> str:
    """A value as a reply repeats it: a long one cut, so a reply never carries a megabyte."""
    text = str(value)
    return text if len(text) <= chars else f"{text[:chars]}… ({len(text)} characters)"


def check_json(data: bytes, max_bytes: int, max_depth: int = MAX_DEPTH) -> None:
    """Raise ``msgspec.DecodeError`` when ``data`` is larger than ``max_bytes`` or nests
    deeper than ``max_depth``; cheap for the usual small, shallow message."""
    if len(data) > max_bytes:
        raise msgspec.DecodeError(f"{len(data)} bytes; at most {max_bytes} are accepted")
    # Brackets inside strings do not nest: drop the escapes (an escaped backslash first, so
    # that ``\\"`` still ends a string), then every other run between quotes is a string.
    # Only quotes and brackets matter after that. Each pass of the loop below removes
    # exactly the innermost pairs, so the passes needed are the nesting depth. All of it
    # runs at C speed, and most of it on what is left once the rest is deleted.
    data = bytes(data)  # the same object where it is bytes already
    if b"\\" in data:
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    marks = data.translate(None, _NOT_A_MARK)
    if marks.count(b"[") + marks.count(b"{") <= max_depth:
        return  # too few brackets to nest that deep
    # Dropping each pair of adjacent quotes (a string without brackets, or one string's end
    # and the next one's start) keeps every bracket behind an odd or even number of quotes,
    # so inside a string or not: what is left to split is the few strings holding brackets.
    brackets = b"".join(marks.replace(b'""', b"").split(b'"')[0::2])
    for _ in range(max_depth):
        if not brackets:
            return
        # Marked first, removed after: a pair that only the removal makes adjacent waits
        # for the next pass, so a pass is exactly one level.
        brackets = brackets.replace(b"[]", b"()").replace(b"{}", b"()").replace(b"()", b"")
    if brackets:
        raise msgspec.DecodeError(f"nested deeper than {max_depth} levels (or unbalanced brackets)")
