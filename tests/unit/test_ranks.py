"""Which process runs which worker: what ``allot logs --rank N`` reads."""

from allot.core.ranks import Process, process_of_worker, processes
from tests import builders as b
from tests.builders import fold


def test_workers_are_numbered_on_across_nodes_in_node_rank_order() -> None:
    state = fold(
        b.node("node-1", 4),
        b.node("node-2", 2),
        b.submitted("g", gpus=2, workers=3),
        b.plan(b.admission("g", ("node-1", [0, 1, 2, 3]), ("node-2", [0, 1]))),
    )
    job = state.jobs["g"]
    lead = Process(node_id="node-1", node_rank=0, first=0, last=1)
    other = Process(node_id="node-2", node_rank=1, first=2, last=2)
    assert processes(job) == [lead, other]
    assert [process_of_worker(job, rank) for rank in range(4)] == [lead, lead, other, None]
    assert process_of_worker(job, -1) is None
    assert (lead.ranks, other.ranks) == ("0-1", "2")


def test_an_elastic_job_is_one_worker_however_many_gpus_it_got() -> None:
    state = fold(
        b.node("node-1", 4),
        b.submitted("e", gpus=1, max_gpus=4),
        b.plan(("e", "node-1", [0, 1, 2, 3])),
    )
    assert processes(state.jobs["e"]) == [Process(node_id="node-1", node_rank=0, first=0, last=0)]


def test_a_job_placed_nowhere_has_no_process() -> None:
    state = fold(b.node("node-1", 4), b.submitted("p"))
    assert processes(state.jobs["p"]) == []
    assert process_of_worker(state.jobs["p"], 0) is None
