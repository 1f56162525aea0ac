"""Services and loops run in the background of a test."""

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine
from typing import Any


@contextlib.asynccontextmanager
async def background(*work: Coroutine[Any, Any, object]) -> AsyncIterator[list[asyncio.Task[Any]]]:
    """Run each of ``work`` as a task while the ``async with`` body runs; cancel them after.
    A task that failed meanwhile raises its error here."""
    tasks = [asyncio.create_task(w) for w in work]
    try:
        yield tasks
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
