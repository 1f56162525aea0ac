"""Upcasters: how an event written at an older version of its type reads at the current one.

An upcaster takes one event as plain JSON data at version N of its type and returns it at
version N + 1. ``allot.bus.codec`` runs a type's chain, from the version an event was written
at up to the type's ``VERSION``, every time it reads such an event: old events are upcast,
never rewritten (docs/adr/0028). To change a type in a way that would make its old events
read wrong: raise its ``VERSION`` in ``allot.proto.events``, add the step from the old
version here, and a test that an event of the old version decodes to what it meant.

Upcasters are pure functions of the event: they must not look at other events, the clock
or the code's configuration, or replay would read the log differently from the services.
"""

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Final

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]


def _admissions_per_node(event: dict[str, Any]) -> dict[str, Any]:
    """PlanComputed 1 to 2: ``{job_id, node_id, gpus}`` admissions get a list of placements.
    One that has them already is left alone: readers before per-type versions took such a
    plan as it was, and a log they accepted must still replay."""
    admissions = []
    for admission in event.get("admissions", []):
        if "placements" in admission:
            admissions.append(admission)
            continue
        upcast = {k: v for k, v in admission.items() if k not in ("node_id", "gpus")}
        upcast["placements"] = [{"node_id": admission["node_id"], "gpus": admission["gpus"]}]
        admissions.append(upcast)
    return {**event, "admissions": admissions}


# (event type tag, the version it upcasts from) -> the step to the next version
UPCASTERS: Final[Mapping[tuple[str, int], Upcaster]] = MappingProxyType(
    {
        ("PlanComputed", 1): _admissions_per_node,
    }
)
