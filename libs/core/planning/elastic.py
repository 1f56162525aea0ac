"""Phase 6: elastic jobs admitted in this cycle grow toward ``max_gpus`` with what is left
(R6): free GPUs on their node (in their island, for ``nvlink``), in queue order, as far as
quota allows. Growing jobs already running needs a resize protocol with the node agent."""

from allot.core.planning.cycle import Cycle
from allot.core.quota import gpu_amounts
from allot.proto.events import Placement


def grow_elastic(cycle: Cycle) -> None:
    capacity, quotas = cycle.capacity, cycle.quotas
    for admitted in cycle.admitted:
        spec = admitted.job.spec
        if spec.max_gpus is None or spec.max_gpus <= spec.gpus:
            continue
        placement = admitted.placements[0]
        space = capacity.nodes[placement.node_id]
        if spec.topology == "nvlink":
            spare = space.islands[space.home[placement.gpus[0]]]
        else:
            spare = sorted(g for island in space.islands for g in island)
        extra = min(spec.max_gpus - spec.gpus, len(spare))
        while extra and quotas.check_amounts(spec.account, gpu_amounts(extra, space.model)):
            extra -= 1
        if not extra:
            continue
        more = spare[:extra]
        capacity.take(space.node_id, more)
        quotas.charge(spec.account, gpu_amounts(extra, space.model))
        grown = Placement(node_id=space.node_id, gpus=sorted(placement.gpus + more))
        admitted.placements = [grown]
