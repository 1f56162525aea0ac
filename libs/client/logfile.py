"""Exported logs: JSON lines, one message each, gzip-compressed when the name ends in .gz.

Each line: ``{"seq": 12, "subject": "allot.evt.job.j-1.JobSubmitted", "headers": {...},
"event": {...}}``. A message that is not JSON (or spans lines) keeps its bytes as
``data_b64``. Importing into an empty stream reproduces the same sequences, subjects and
message bytes, so a log attached to a bug report replays on another machine exactly as it
did on the cluster; of the headers, the message id is dropped (an id reused long ago must
not be deduplicated away) and the expected last sequence is set to place each message.
"""

import base64
import binascii
import gzip
import zlib
from collections.abc import AsyncIterable, Callable, Iterator
from pathlib import Path
from typing import IO, cast

import msgspec

from allot.bus.eventlog import Record, make_record
from allot.bus.log import Log
from allot.proto.limits import MAX_EVENT_BYTES, check_json
from allot.proto.subjects import subject_matches

_NULL = msgspec.Raw(b"null")
Progress = Callable[[int, int | None], None]  # (done, total if known)


class Line(msgspec.Struct, kw_only=True, omit_defaults=True):
    seq: int
    subject: str
    headers: dict[str, str] = {}
    event: msgspec.Raw = _NULL  # the message itself, when it is JSON
    data_b64: str | None = None  # otherwise, its bytes


class LogFileError(Exception):
    """An exported log that cannot be read or imported; the message says where and why."""


_line_decoder = msgspec.json.Decoder(Line)
_encoder = msgspec.json.Encoder()
_json_check = msgspec.json.Decoder()


def _open(path: Path, mode: str) -> IO[bytes]:
    """``mode`` is "rb" or "wb"."""
    if path.suffix == ".gz":
        return cast(IO[bytes], gzip.open(path, mode))
    return cast(IO[bytes], open(path, mode))


async def export_log(
    records: AsyncIterable[Record], path: Path, progress: Progress | None = None
) -> int:
    """Write every record to ``path``; how many. ``progress(written, None)`` is told after
    each."""
    count = 0
    with _open(path, "wb") as out:
        async for record in records:
            line = Line(seq=record.seq, subject=record.subject, headers=record.headers)
            try:
                # Bounded first: a line's reader must not meet nesting its decoder cannot.
                check_json(record.data, MAX_EVENT_BYTES)
                _json_check.decode(record.data)
                readable = b"\n" not in record.data and b"\r" not in record.data
            except msgspec.DecodeError:
                readable = False
            if readable:
                line.event = msgspec.Raw(record.data)
            else:  # not JSON, or JSON that would break the line
                line.data_b64 = base64.b64encode(record.data).decode()
            out.write(_encoder.encode(line) + b"\n")
            count += 1
            if progress is not None:
                progress(count, None)
    return count


def read_log(path: Path, subject_prefix: str = "") -> Iterator[Record]:
    """The records of an exported log, in file order, decoded as the services decode them;
    with ``subject_prefix``, only those whose subject starts with it (the rest are skipped
    without decoding their events)."""
    try:
        with _open(path, "rb") as lines:
            for number, text in enumerate(lines, start=1):
                if not text.strip():
                    continue
                try:
                    line = _line_decoder.decode(text)
                except (msgspec.DecodeError, RecursionError) as error:
                    # Nesting too deep for the line's decoder is a bad line; the event in
                    # it is bounded again when it is decoded (``make_record``).
                    raise LogFileError(f"{path}:{number}: not a log line ({error})") from None
                if not line.subject.startswith(subject_prefix):
                    continue
                if line.data_b64 is not None:
                    try:
                        data = base64.b64decode(line.data_b64, validate=True)
                    except binascii.Error as error:
                        raise LogFileError(f"{path}:{number}: data_b64: {error}") from None
                else:
                    data = bytes(line.event)
                yield make_record(line.seq, line.subject, data, line.headers)
    except (OSError, EOFError, gzip.BadGzipFile, zlib.error) as error:
        raise LogFileError(f"{path}: {error}") from None


async def import_log(path: Path, events: Log, progress: Progress | None = None) -> int:
    """Append an exported log to an empty stream, each message at its own sequence. The
    file is checked whole first: a bad one imports nothing. ``progress(appended, total)``
    is told after each append."""
    await events.ensure_stream()  # a fresh server has none yet
    if await events.last_seq() != 0:
        raise LogFileError("the stream is not empty: import needs an empty one")
    previous = 0
    settings = events.settings
    for record in read_log(path):
        if record.seq != previous + 1:
            raise LogFileError(
                f"{path}: sequence {record.seq} follows {previous}; "
                "only a whole log from sequence 1, without gaps, can be imported"
            )
        if not any(subject_matches(record.subject, s) for s in settings.subjects):
            raise LogFileError(
                f"{path}: sequence {record.seq}: subject {record.subject!r} "
                f"is not one of the stream's ({', '.join(settings.subjects)})"
            )
        if len(record.data) > settings.max_msg_size:
            raise LogFileError(f"{path}: sequence {record.seq} is larger than the stream takes")
        previous = record.seq
    for record in read_log(path):
        await events.append_raw(record.subject, record.data, record.headers, record.seq - 1)
        if progress is not None:
            progress(record.seq, previous)
    return previous
