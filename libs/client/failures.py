"""A command's ordinary failures as one line each, with what to do and an exit code of its
own (allot.client.exitcodes): a user never reads a traceback for a server that is down, a
service that does not answer, a command too large, a wait that ran out or a closed pipe."""

import argparse
import os
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from allot.bus.urls import redacted
from allot.client import exitcodes
from allot.client.sending import NoAnswer, PayloadTooLarge, WaitTimedOut
from allot.core.durations import format_duration

WHERE_TO_CONNECT = "is `allot up` running? (or pass --nats-url / set ALLOT_NATS_URL)"


class Unreachable(Exception):
    """No NATS server answered at ``url`` (already redacted)."""

    def __init__(self, url: str):
        super().__init__(url)
        self.url = url


Handler = Callable[[argparse.Namespace], int | Coroutine[Any, Any, int]]


def run(handler: Handler, args: argparse.Namespace) -> int:
    """Run a command to its exit code; an ordinary failure is said on stderr in one line.
    A handler that returns a coroutine runs in an event loop; one that needs none (a plain
    ``allot submit``) starts without asyncio or nats-py loaded, which is most of its time."""
    try:
        code = handler(args)
        if isinstance(code, Coroutine):
            import asyncio

            code = asyncio.run(code)
        assert isinstance(code, int)
        sys.stdout.flush()  # here, where a closed pipe can still be told apart
        return code
    except KeyboardInterrupt:
        return exitcodes.INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`allot … | head`). As the Python docs advise: whatever is
        # still buffered goes nowhere, rather than into a second error at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return exitcodes.BROKEN_PIPE
    except (Unreachable, NoAnswer, PayloadTooLarge, WaitTimedOut) as error:
        return told(error)
    except Exception as error:
        # A failure of nats-py's is possible only where it was loaded.
        nats_errors = sys.modules.get("nats.errors")
        if nats_errors is None or not isinstance(error, nats_errors.Error):
            raise
        return told(error)


def told(error: Exception) -> int:
    message, code = said(error)
    print(f"allot: {message}", file=sys.stderr)
    return code


def said(error: Exception) -> tuple[str, int]:
    """What to tell the user of ``error``, and the exit code."""
    if isinstance(error, Unreachable):
        return f"cannot reach NATS at {error.url}: {WHERE_TO_CONNECT}", exitcodes.UNREACHABLE
    if isinstance(error, NoAnswer):
        return (
            f"{error}: is Allot running there? (`allot up`, or ask its operator)",
            exitcodes.NO_ANSWER,
        )
    if isinstance(error, PayloadTooLarge):
        return (
            f"the {error.command} command is too large: {error.size} bytes, over the NATS "
            f"server's limit of {error.limit} bytes (its max_payload): send less (a smaller "
            "file, fewer or shorter --env), or raise max_payload in the server's configuration",
            exitcodes.TOO_LARGE,
        )
    if isinstance(error, WaitTimedOut):
        waited = format_duration(round(error.timeout * 10**9), 2)
        return (
            f"{error.job_id} still {error.status.upper()} after {waited}; "
            f"`allot status {error.job_id}` to follow it",
            exitcodes.WAIT_TIMED_OUT,
        )
    import nats.errors
    import nats.js.errors

    if isinstance(error, nats.js.errors.NotFoundError):
        return (
            f"the NATS server holds no Allot event log ({error.description}): is it the NATS "
            "of an `allot up` or `allot deploy`, and have its services started?",
            exitcodes.NO_ANSWER,
        )
    if isinstance(error, nats.errors.MaxPayloadError):
        return (
            "a message is larger than the NATS server takes (its max_payload): send less, or "
            "raise max_payload in the server's configuration",
            exitcodes.TOO_LARGE,
        )
    if isinstance(error, nats.errors.NoRespondersError | nats.errors.TimeoutError):
        return (
            f"the NATS server's JetStream did not answer ({error}): is JetStream enabled, "
            "and is the server overloaded?",
            exitcodes.NO_ANSWER,
        )
    return f"NATS: {error}", exitcodes.FAILED


def unreachable(url: str) -> Unreachable:
    return Unreachable(redacted(url))
