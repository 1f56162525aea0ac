"""Where snapshots of the folded state are kept: a JetStream object store next to the log.

One object, ``state``, holds the latest snapshot (``allot.core.snapshot``); writing it
again replaces it. Another, ``base``, holds the state the log now begins from, once its
start was archived (``allot log archive``). Only the planner may write the bucket (and
the operator, who archives) and every service may read it (``allot.bus.permissions``).
What is read is checked as it comes: its size against the object's meta and
``MAX_SNAPSHOT_BYTES``, its SHA-256 against the meta's digest; nothing is returned
half-read. The chunks are read with an ordered consumer of the bucket's stream
named outright, as the log is read: nats-py's own ``get`` looks the stream up by subject
and copies the object once per chunk.
"""

import base64
import contextlib
import hashlib

import nats
from nats.js import JetStreamContext
from nats.js.api import ObjectInfo, ObjectMeta, ObjectMetaOptions, ObjectStoreConfig, StorageType
from nats.js.errors import BucketNotFoundError, NotFoundError, ObjectNotFoundError
from nats.js.object_store import ObjectStore

from allot.proto.subjects import SNAPSHOT_BUCKET, SNAPSHOT_STREAM, STREAM

OBJECT = "state"  # the latest snapshot
BASE = "base"  # the state at the sequence before the first the stream still holds
CHUNK_BYTES = 512 << 10  # below the server's payload limit
MAX_SNAPSHOT_BYTES = 4 << 30  # a state larger than this is no state a reader takes
READ_TIMEOUT_S = 10.0  # the longest a chunk may take to come
POLL_S = 1.0  # how long a reader waits for a chunk before it looks whether the object was replaced
MAX_REREADS = 5  # an object replaced this often while it is read is not read


class SnapshotUnreadable(Exception):
    """The stored snapshot could not be read whole; the message says why."""


async def write_snapshot(
    js: JetStreamContext, data: bytes, description: str, name: str = OBJECT
) -> None:
    """Store ``data`` as the snapshot ``name``, making the bucket if there is none yet, in
    as many copies as the log is kept in: the log's loss of a server must not cost the
    snapshot too."""
    try:
        store = await js.object_store(SNAPSHOT_BUCKET)
    except (BucketNotFoundError, NotFoundError):
        log = await js.stream_info(STREAM)
        config = ObjectStoreConfig(
            description="snapshots of the folded log",
            storage=StorageType.FILE,
            replicas=log.config.num_replicas or 1,
        )
        store = await js.create_object_store(SNAPSHOT_BUCKET, config)
    options = ObjectMetaOptions(max_chunk_size=CHUNK_BYTES)
    meta = ObjectMeta(name=name, description=description, options=options)
    await store.put(name, data, meta=meta)


async def read_snapshot(js: JetStreamContext, name: str = OBJECT) -> bytes | None:
    """The snapshot ``name``'s bytes, None if none was ever written; ``SnapshotUnreadable``
    if one is there and cannot be read whole. One replaced while it is read (its chunks
    purged under the reader) is read again, as the new one."""
    store = ObjectStore(name=SNAPSHOT_BUCKET, stream=SNAPSHOT_STREAM, js=js)
    for _ in range(MAX_REREADS):
        info = await _info(store, name)
        if info is None:
            return None
        data = await _chunks(js, store, info)
        if data is not None:
            return data
    raise SnapshotUnreadable(f"replaced {MAX_REREADS} times while it was read")


async def _info(store: ObjectStore, name: str) -> ObjectInfo | None:
    try:
        return await store.get_info(name)
    except (ObjectNotFoundError, NotFoundError):
        return None
    except nats.js.errors.Error as error:
        raise SnapshotUnreadable(f"its meta: {error}") from None


async def _chunks(js: JetStreamContext, store: ObjectStore, info: ObjectInfo) -> bytes | None:
    """The bytes of the object ``info`` describes; None if it was replaced meanwhile."""
    size, digest = info.size or 0, info.digest or ""
    if not 0 < size <= MAX_SNAPSHOT_BYTES:
        raise SnapshotUnreadable(f"{size} bytes; at most {MAX_SNAPSHOT_BYTES} are read")
    sub = await js.subscribe(
        f"$O.{SNAPSHOT_BUCKET}.C.{info.nuid}",
        stream=SNAPSHOT_STREAM,
        ordered_consumer=True,
        pending_bytes_limit=max(size, 64 << 20),
    )
    chunks: list[bytes] = []
    read, waited = 0, 0.0
    try:
        while read < size:
            try:
                msg = await sub.next_msg(timeout=POLL_S)
            except (TimeoutError, nats.errors.TimeoutError):
                now = await _info(store, info.name)
                if now is None or now.nuid != info.nuid:
                    return None  # its chunks are being purged: none will come
                waited += POLL_S
                if waited >= READ_TIMEOUT_S:
                    raise SnapshotUnreadable(f"{read} of {size} bytes came") from None
                continue
            waited = 0.0
            chunks.append(msg.data)
            read += len(msg.data)
            if msg.metadata.num_pending == 0:
                break
    finally:
        with contextlib.suppress(nats.errors.Error):
            await sub.unsubscribe()
    data = b"".join(chunks)
    if len(data) != size:
        raise SnapshotUnreadable(f"{len(data)} bytes came; its meta says {size}")
    if not _digest_matches(data, digest):
        raise SnapshotUnreadable("its SHA-256 is not the one its meta states")
    return data


def _digest_matches(data: bytes, digest: str) -> bool:
    algorithm, _, encoded = digest.partition("=")
    if algorithm.upper() != "SHA-256":
        return False
    with contextlib.suppress(ValueError):
        return base64.urlsafe_b64decode(encoded) == hashlib.sha256(data).digest()
    return False


async def drop_snapshot(js: JetStreamContext) -> bool:
    """Delete the bucket, snapshots and all (for benchmarks and tests); whether there was one."""
    with contextlib.suppress(NotFoundError, BucketNotFoundError):
        return bool(await js.delete_object_store(SNAPSHOT_BUCKET))
    return False
