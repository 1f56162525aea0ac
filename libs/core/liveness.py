"""When a node counts as lost: silence longer than the timeout."""

from collections.abc import Mapping

from allot.core.model import State


def silent_nodes(
    state: State, last_seen: Mapping[str, float], now: float, timeout: float
) -> list[str]:
    """Nodes not yet lost whose last sign of life (heartbeat or registration, in the
    caller's monotonic seconds) is more than ``timeout`` before ``now``; sorted by id.
    A node the caller has never seen is not judged: it has not had its chance yet."""
    return [
        node_id
        for node_id, node in sorted(state.nodes.items())
        if not node.lost and node_id in last_seen and now - last_seen[node_id] > timeout
    ]
