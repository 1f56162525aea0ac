"""The shape of the cluster as placement sees it: GPU models, NVLink islands and racks.

A node's rack is its ``rack`` label; a node without one is a rack of its own, since nothing
says it is close to any other. A node that declares no NVLink islands has none: each GPU is
an island of one (node agents declare one island of all GPUs unless told otherwise).
"""

from allot.core.model import NodeRecord, State
from allot.proto.events import Topology

RACK_LABEL = "rack"


def rack_of(node: NodeRecord) -> str:
    return node.labels.get(RACK_LABEL) or f"node:{node.node_id}"


def model_of(node: NodeRecord) -> str:
    """A node's GPU model; placement treats a node as holding one model (its first GPU's)."""
    return node.gpus[0].model if node.gpus else ""


def islands_of(node: NodeRecord) -> list[list[int]]:
    indices = [g.index for g in node.gpus]
    if not node.nvlink_islands:
        return [[i] for i in indices]
    known = set(indices)
    islands = [[i for i in island if i in known] for island in node.nvlink_islands]
    covered = {i for island in islands for i in island}
    return [island for island in islands if island] + [[i] for i in indices if i not in covered]


def largest_blocks(state: State, flavor: str | None, per_worker: int) -> dict[Topology, int]:
    """The most GPUs (of ``flavor``, or of any one model) a job of workers with
    ``per_worker`` GPUs each could ever get, by topology, over every registered node busy
    or not: what validation holds a job against."""
    best: dict[Topology, int] = {"nvlink": 0, "node": 0, "rack": 0, "any": 0}
    by_model: dict[str, dict[str, int]] = {}  # model -> rack -> GPUs
    for node in state.nodes.values():
        model = model_of(node)
        if flavor is not None and model != flavor:
            continue
        best["nvlink"] = max(best["nvlink"], *(len(i) for i in islands_of(node)), 0)
        best["node"] = max(best["node"], len(node.gpus))
        racks = by_model.setdefault(model, {})
        usable = len(node.gpus) // per_worker * per_worker  # a worker stays on one node
        racks[rack_of(node)] = racks.get(rack_of(node), 0) + usable
    for racks in by_model.values():
        best["rack"] = max(best["rack"], *racks.values())
        best["any"] = max(best["any"], sum(racks.values()))
    return best
