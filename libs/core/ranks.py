"""Which process of a job runs which of its workers.

A job runs one process per node it is placed on, in the order of its placements (the node
rank). The process on a node starts that node's share of the workers, numbered on from
the workers of the nodes before it, as torchrun numbers them from ``--node-rank``. So
worker N's output is in the output of the process that runs it.
"""

import msgspec

from allot.core.model import JobRecord
from allot.proto.events import JobSpec


class Process(msgspec.Struct, frozen=True, kw_only=True):
    """The process of a job on one node, and the workers it runs: ``first`` to ``last``."""

    node_id: str
    node_rank: int
    first: int
    last: int

    @property
    def ranks(self) -> str:
        """``"3"``, or ``"0-1"`` for a process that runs several workers."""
        return str(self.first) if self.first == self.last else f"{self.first}-{self.last}"


def local_workers(spec: JobSpec, gpus: int) -> int:
    """How many workers a process with ``gpus`` of the job's GPUs starts. An elastic job
    is one worker, however many GPUs it was given."""
    return 1 if spec.max_gpus else gpus // spec.gpus


def processes(job: JobRecord) -> list[Process]:
    """The job's processes of its current attempt, in node-rank order; [] while it is
    placed nowhere."""
    found: list[Process] = []
    first = 0
    for node_rank, (node_id, gpus) in enumerate(job.placements.items()):
        count = local_workers(job.spec, len(gpus))
        found.append(Process(node_id=node_id, node_rank=node_rank, first=first,
                             last=first + count - 1))  # fmt: skip
        first += count
    return found


def process_of_worker(job: JobRecord, rank: int) -> Process | None:
    """The process that runs worker ``rank``; None if the job has no such worker placed."""
    return next((p for p in processes(job) if p.first <= rank <= p.last), None)
