"""Exported logs: JSON lines, one message each, gzip-compressed when the name ends in .gz.

Each line: ``{"seq": 12, "subject": "allot.evt.job.j-1.JobSubmitted", "headers": {...},
"event": {...}}``. A message that is not JSON keeps its bytes as ``data_b64``. Importing
into an empty stream reproduces the same sequences, so a log attached to a bug report
replays on another machine exactly as it did on the cluster.
"""

import base64
import gzip
from collections.abc import AsyncIterable, Iterator
from pathlib import Path
from typing import IO, cast

import msgspec

from allot.bus.eventlog import EventLog, Record, make_record

_NULL = msgspec.Raw(b"null")


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


async def export_log(records: AsyncIterable[Record], path: Path) -> int:
    """Write every record to ``path``; how many."""
    count = 0
    with _open(path, "wb") as out:
        async for record in records:
            line = Line(seq=record.seq, subject=record.subject, headers=record.headers)
            try:
                _json_check.decode(record.data)
                line.event = msgspec.Raw(record.data)
            except msgspec.DecodeError:
                line.data_b64 = base64.b64encode(record.data).decode()
            out.write(_encoder.encode(line) + b"\n")
            count += 1
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
                except msgspec.DecodeError as error:
                    raise LogFileError(f"{path}:{number}: not a log line ({error})") from None
                if not line.subject.startswith(subject_prefix):
                    continue
                if line.data_b64 is not None:
                    data = base64.b64decode(line.data_b64)
                else:
                    data = bytes(line.event)
                yield make_record(line.seq, line.subject, data, line.headers)
    except (OSError, EOFError, gzip.BadGzipFile) as error:
        raise LogFileError(f"{path}: {error}") from None


async def import_log(path: Path, events: EventLog) -> int:
    """Append an exported log to an empty stream, each message at its own sequence. The
    file is checked whole first: a bad one imports nothing."""
    await events.ensure_stream()  # a fresh server has none yet
    if await events.last_seq() != 0:
        raise LogFileError("the stream is not empty: import needs an empty one")
    previous = 0
    for record in read_log(path):
        if record.seq != previous + 1:
            raise LogFileError(
                f"{path}: sequence {record.seq} follows {previous}; "
                "only a whole log from sequence 1, without gaps, can be imported"
            )
        previous = record.seq
    for record in read_log(path):
        await events.append_raw(record.subject, record.data, record.headers, record.seq - 1)
    return previous
