"""The parent of every job process: ``python -I -S supervise.py DIR -- CMD…``.

It leads the job's process group, so a signal to the group reaches the job, while it
survives SIGTERM itself to write the job's exit status into ``DIR/exit_code`` (atomically)
before leaving. A restarted node agent reads that file instead of losing the status. When
the job's main process has ended, whatever it left running in its group is killed with the
supervisor itself: the job's GPUs are handed out again at once.

The agent starts it with SIGTERM and SIGINT blocked: a stop sent before the job exists
stays pending, arrives here once the handler is in place, and is passed on to the job as
soon as it has started.

It stands between a job's submission and its first instruction, so it starts as little of
Python as it can: run by its path, isolated and without ``site`` (``-I -S``: no
site-packages, no path hooks of an editable install), importing only ``os``, ``signal``
and ``sys``, and starting the job by ``fork`` and ``exec``, not ``subprocess``.
"""

import os
import signal
import sys

STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}


def write_atomically(path: "os.PathLike[str] | str", text: str) -> None:
    """Write a file that a crash cannot leave half-written."""
    tmp = f"{os.fspath(path)}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def main(argv: list[str]) -> int:
    job_dir, command = argv[0], argv[2:]
    received: list[int] = []
    for signum in STOP_SIGNALS:
        signal.signal(signum, lambda number, frame: received.append(number))
    # Forked with the stop signals still blocked: the job's copy of this process resets
    # them to their default before it unblocks them, so a stop pending or sent before the
    # exec ends it, instead of being swallowed by a copy of the handler above.
    job = os.fork()
    if job == 0:
        try:
            for signum in STOP_SIGNALS:
                signal.signal(signum, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
            os.execvp(command[0], command)
        except OSError as error:
            os.write(2, f"allot: cannot run {command[0]!r}: {error}\n".encode())
        os._exit(127)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # runs the handler for any pending
    if received:  # arrived before the job existed, so the group signal missed it
        os.kill(job, received[0])
    code = os.waitstatus_to_exitcode(os.waitpid(job, 0)[1])
    write_atomically(os.path.join(job_dir, "exit_code"), str(code))
    os.killpg(0, signal.SIGKILL)  # the job's leftovers, and this process last
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
