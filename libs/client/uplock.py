"""One ``allot up`` per data directory and per ALLOT_HOME: a second one would share the
first one's JetStream store and remove its current.json.

The lock is the OS's (flock) on a file that stays: it is held as long as the process lives
and released by the kernel however the process ends, so a crashed ``allot up`` never
leaves a stale lock behind. The file says who holds it (pid, NATS URL) for the message of
the one refused.
"""

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any


class Held(Exception):
    """Another process holds the lock; ``owner`` is what it wrote of itself (maybe {})."""

    def __init__(self, path: Path, owner: dict[str, Any]):
        super().__init__(f"{path} is held by {owner or 'another process'}")
        self.path, self.owner = path, owner


class Lock:
    """A held lock; ``note`` says more of its owner (the NATS URL, once it is known)."""

    def __init__(self, fd: int, owner: dict[str, Any]):
        self._fd = fd
        self.owner = owner

    def note(self, **fields: Any) -> None:
        self.owner.update(fields)
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, json.dumps(self.owner).encode(), 0)


@contextlib.contextmanager
def holding(path: Path, owner: dict[str, Any]) -> Iterator[Lock]:
    """Hold the lock at ``path`` (made if missing) while the block runs; Held if another
    process does. ``owner`` (with this pid) is written into the file for others to read."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # Not truncated on open: the holder's words stay readable to whoever is refused.
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise Held(path, _written(fd)) from None
        lock = Lock(fd, {"pid": os.getpid()})
        lock.note(**owner)
        yield lock
    finally:
        os.close(fd)  # releases the lock, if this process took it


def _written(fd: int) -> dict[str, Any]:
    with contextlib.suppress(OSError, ValueError):
        owner = json.loads(os.pread(fd, 4096, 0))
        if isinstance(owner, dict):
            return owner
    return {}
