"""What ``allot`` exits with, one place for all (the README's table lists them).

``submit --wait`` exits with its job's own exit code, so the CLI's own failures take codes a
shell or a standard already gives the same meaning: sysexits.h's for "unavailable", "try
again later" and "bad data", timeout(1)'s 124, and 128 + the signal for Ctrl-C and a closed
pipe.
"""

from typing import Final

OK: Final = 0
FAILED: Final = 1  # what was asked for failed: no such job, a plan diverged, a job failed
USAGE: Final = 2  # bad arguments or input, or refused by the intake: nothing was changed
TOO_LARGE: Final = 65  # EX_DATAERR: a command larger than the NATS server takes
UNREACHABLE: Final = 69  # EX_UNAVAILABLE: no NATS server at the URL
IN_USE: Final = 73  # EX_CANTCREAT: another `allot up` holds the data directory or ALLOT_HOME
NO_ANSWER: Final = 75  # EX_TEMPFAIL: NATS is up, but the service behind a subject did not answer
WAIT_TIMED_OUT: Final = 124  # as timeout(1): `submit --wait --timeout` ran out, the job goes on
INTERRUPTED: Final = 130  # 128 + SIGINT: Ctrl-C
BROKEN_PIPE: Final = 141  # 128 + SIGPIPE: the reader went away (`allot … | head`), as a shell's
