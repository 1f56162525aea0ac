"""The parent of every job process: ``python -m allot.services.node.supervise DIR -- CMD…``.

It leads the job's process group, so a signal to the group reaches the job, while it
survives SIGTERM itself to write the job's exit status into ``DIR/exit_code`` (atomically)
before leaving. A restarted node agent reads that file instead of losing the status.
"""

import os
import signal
import subprocess
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    job_dir, command = Path(argv[0]), argv[2:]
    # A Python-level handler (not SIG_IGN) is reset to the default by exec, so the job
    # itself still receives and handles SIGTERM.
    signal.signal(signal.SIGTERM, lambda signum, frame: None)
    signal.signal(signal.SIGINT, lambda signum, frame: None)
    try:
        code = subprocess.call(command)
    except OSError as error:
        print(f"allot: cannot run {command[0]!r}: {error}", file=sys.stderr, flush=True)
        code = 127
    tmp = job_dir / "exit_code.tmp"
    with open(tmp, "w") as f:
        f.write(str(code))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, job_dir / "exit_code")
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
