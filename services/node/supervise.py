"""The parent of every job process: ``python -m allot.services.node.supervise DIR -- CMD…``.

It leads the job's process group, so a signal to the group reaches the job, while it
survives SIGTERM itself to write the job's exit status into ``DIR/exit_code`` (atomically)
before leaving. A restarted node agent reads that file instead of losing the status. When
the job's main process has ended, whatever it left running in its group is killed with the
supervisor itself: the job's GPUs are handed out again at once.

The agent starts it with SIGTERM and SIGINT blocked: a stop sent before the job exists
stays pending, arrives here once the handler is in place, and is passed on to the job as
soon as it has started.
"""

import os
import signal
import subprocess
import sys
from pathlib import Path

from allot.services.node.files import write_atomically

STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}


def main(argv: list[str]) -> int:
    job_dir, command = Path(argv[0]), argv[2:]
    received: list[int] = []
    for signum in STOP_SIGNALS:
        # A Python-level handler (not SIG_IGN) is reset to the default by exec, so the job
        # itself still receives and handles the signal.
        signal.signal(signum, lambda number, frame: received.append(number))
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    try:
        job = subprocess.Popen(command)
    except OSError as error:
        print(f"allot: cannot run {command[0]!r}: {error}", file=sys.stderr, flush=True)
        code = 127
    else:
        if received:  # arrived before the job existed, so the group signal missed it
            job.send_signal(received[0])
        code = job.wait()
    write_atomically(job_dir / "exit_code", str(code))
    os.killpg(0, signal.SIGKILL)  # the job's leftovers, and this process last
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
