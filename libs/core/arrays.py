"""Job arrays (docs/adr/0035): one submission, one event, a task per index.

Each task is a job of its own, named ``<array id>_<index>`` as Slurm names them, so that
status, logs, cancel and explain work on a task as on any job. What is shared is kept once:
the spec (one object for every task) and the array's record (``ArrayRecord``). An array with
``max_running`` keeps the rest of its tasks out of the queue until one of those in it ends,
so a planning cycle never looks at more of an array's tasks than it may run.

Indices are written as Slurm writes them: ``0-999``, ``1,3,5-9``, ``0-99:2`` (every second),
and ``%50`` at the end for ``max_running``.
"""

import re

from allot.proto.commands import FieldError
from allot.proto.events import ArrayTasks, IndexRange
from allot.proto.limits import MAX_ARRAY_INDEX, MAX_ARRAY_RANGES, MAX_ARRAY_TASKS, shown

SYNTAX = "indices such as 0-999, 1,3,5-9 or 0-99:2, then optionally %N (at most N at once)"
_ITEM = re.compile(r"(\d{1,12})(?:-(\d{1,12})(?::(\d{1,12}))?)?")


def task_id(array_id: str, index: int) -> str:
    """The job id of the array's task at ``index``."""
    return f"{array_id}_{index}"


def count(array: ArrayTasks) -> int:
    """How many indices its ranges name, an index named twice counted twice: worked out
    without listing them, so that a range of millions is refused before it is listed."""
    return sum(
        (r.last - r.first) // r.step + 1 for r in array.indices if r.step > 0 and r.last >= r.first
    )


def indices(array: ArrayTasks) -> list[int]:
    """The array's indices, each once, in order. Only for an array ``array_problems`` let
    through."""
    return sorted({i for r in array.indices for i in range(r.first, r.last + 1, r.step)})


def array_problems(array: ArrayTasks) -> list[FieldError]:
    """What is wrong with an array in itself; each problem names the field."""
    errors: list[FieldError] = []

    def bad(field: str, value: object, message: str) -> None:
        errors.append(FieldError(field=field, value=shown(value), message=message))

    if not 1 <= len(array.indices) <= MAX_ARRAY_RANGES:
        bad("array.indices", len(array.indices), f"from 1 to {MAX_ARRAY_RANGES} ranges")
    for n, r in enumerate(array.indices[:MAX_ARRAY_RANGES]):
        where = f"array.indices[{n}]"
        if not (0 <= r.first <= MAX_ARRAY_INDEX and 0 <= r.last <= MAX_ARRAY_INDEX):
            bad(where, f"{r.first}-{r.last}", f"indices from 0 to {MAX_ARRAY_INDEX}")
        elif r.last < r.first:
            bad(where, f"{r.first}-{r.last}", "the last index is below the first")
        if r.step < 1:
            bad(f"{where}.step", r.step, "at least 1")
    if not errors and (tasks := count(array)) > MAX_ARRAY_TASKS:
        bad("array", tasks, f"at most {MAX_ARRAY_TASKS} tasks; a larger sweep is several arrays")
    cap = array.max_running
    if cap is not None and not 1 <= cap <= MAX_ARRAY_TASKS:
        bad("array.max_running", cap, f"from 1 to {MAX_ARRAY_TASKS}")
    return errors


class ArraySyntaxError(ValueError):
    """Text that is not an array's indices; the message says what would be."""


def parse(text: str) -> ArrayTasks:
    """``0-999%50`` as an array (ranges as written; ``array_problems`` judges them)."""
    body, percent, cap_text = text.strip().partition("%")
    if percent and not (cap_text.isdigit() and len(cap_text) <= 12):
        raise ArraySyntaxError(f"{text!r}: after % a whole number of tasks; {SYNTAX}")
    ranges: list[IndexRange] = []
    for item in body.split(","):
        found = _ITEM.fullmatch(item.strip())
        if found is None:
            raise ArraySyntaxError(f"{text!r}: {item.strip()!r} is not an index or range; {SYNTAX}")
        first, last, step = found.groups()
        ranges.append(IndexRange(first=int(first), last=int(last or first), step=int(step or 1)))
    return ArrayTasks(indices=ranges, max_running=int(cap_text) if percent else None)


def text(array: ArrayTasks) -> str:
    """The array as ``parse`` reads it: ``0-999%50``."""
    items = [
        str(r.first)
        if r.first == r.last
        else f"{r.first}-{r.last}" + (f":{r.step}" if r.step > 1 else "")
        for r in array.indices
    ]
    cap = f"%{array.max_running}" if array.max_running is not None else ""
    return ",".join(items) + cap
