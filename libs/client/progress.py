"""Progress bars on stderr for long work (replay --verify, log export and import, sim), by
rich (docs/adr/0019): shown only when stderr is a terminal, so that scripts, pipes and tests
read nothing of them.

The work reports ``(done, total)`` (total None where it is not known, or was known from
the start) as often as it likes: the bar is told a few times a second whatever the rate.
"""

import contextlib
import sys
import time
from collections.abc import Callable, Iterator

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

Report = Callable[[int, int | None], None]


@contextlib.contextmanager
def shown(what: str, total: int | None = None) -> Iterator[Report | None]:
    """A bar for ``what`` while the block runs, and its report function; None (nothing to
    report to) when stderr is not a terminal."""
    if not sys.stderr.isatty():
        yield None
        return
    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(what, total=total)

        next_at = 0.0

        def report(done: int, total_now: int | None) -> None:
            # rich's update takes a lock and some microseconds: at a million events a second
            # that would be seconds, so it is told at most twenty times a second.
            nonlocal next_at
            now = time.monotonic()
            if now >= next_at or done == total_now:
                next_at = now + 0.05
                bar.update(task, completed=done, total=total_now or bar.tasks[task].total)

        yield report
