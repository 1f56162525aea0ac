"""Durations as people write them (``90s``, ``1h30m``, ``2d12h``) and as nanoseconds."""

import re

# Days, hours, minutes and seconds, each at most once and largest first: 90s, 1h30m, 2d12h.
_DURATION = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
_UNITS = (("d", 86400 * 10**9), ("h", 3600 * 10**9), ("m", 60 * 10**9), ("s", 10**9))


def parse_duration(text: str) -> int:
    """``"90s"``, ``"30m"``, ``"1h30m"``, ``"2d12h"`` -> nanoseconds. Raises ValueError."""
    if len(text) > 32:  # more digits than any duration needs, and int() balks at 4,300
        raise ValueError(f"{text[:32]!r}... is not a duration: too long")
    match = _DURATION.match(text.strip())
    if not match or not any(match.groups()):
        raise ValueError(
            f"{text!r} is not a duration: whole numbers of d, h, m and s, largest first, "
            "such as 90s, 30m, 1h30m or 7d"
        )
    return sum(int(n) * ns for n, (_, ns) in zip(match.groups(), _UNITS, strict=True) if n)


def format_duration(ns: int, units: int | None = None) -> str:
    """Nanoseconds as ``parse_duration`` reads them: 5415 s -> ``1h30m15s``; a part of a
    second as a decimal to the millisecond (``1.5s``), or in ns below one. ``units``: from
    the largest unit present, only that many units of the scale (``1h23m`` for a glance at
    a wait, ``2d`` for 2 days and 7 seconds)."""
    if ns < 0:
        return "-" + format_duration(-ns, units)
    seconds, fraction = divmod(ns, 10**9)
    minutes, seconds = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    counts = [("d", days), ("h", hours), ("m", minutes), ("s", seconds)]
    first = next((i for i, (_, n) in enumerate(counts) if n), len(counts) - 1)
    shown = counts[first:] if units is None else counts[first : first + units]
    parts = [f"{n}{unit}" for unit, n in shown if n and unit != "s"]
    decimals = f"{fraction:09d}"[:3].rstrip("0")
    with_seconds = shown[-1][0] == "s"
    if with_seconds and decimals:
        parts.append(f"{seconds}.{decimals}s")
    elif with_seconds and seconds:
        parts.append(f"{seconds}s")
    elif with_seconds and fraction and not parts:
        parts.append(f"{fraction}ns")
    return "".join(parts) or "0s"
