"""File writes that a crash cannot leave half-done. Kept free of heavy imports: the job
supervisor imports it on every job start."""

import os
from pathlib import Path


def write_atomically(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
