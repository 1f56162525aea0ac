"""What must hold of a log after chaos, checked from the exported log alone (docs/adr/0026).

``check`` folds the records as the services do and, at every step, looks for a breach of
one of these invariants; each finding names the invariant, the job and the sequence:

- ``acknowledged``: every submission a client was told was accepted (its idempotency key
  and job id) appears in the log exactly once, under that job id;
- ``ended``: every job in the log has reached an end state;
- ``started-once``: no attempt of a job is started twice on a node (two JobStarted of one
  attempt with different processes);
- ``one-holder``: no GPU is held by two jobs at once: no process is started on a GPU where
  the process of another job was started and has not ended, and no job is allotted one;
- ``checkpoint-kept``: a job's checkpoints only move forward: none seen after the latest
  recorded one is numbered at or below it (checkpoints are numbered across attempts from
  the files the job left, so an attempt that lost them would number from 1 again). One
  seen *before* it and stored late (an append retried across an outage) is a late report,
  not lost work: the time its agent stamped says which;
- ``replay``: every recorded plan is recomputed from its basis to the same decision;
- ``known-process``: every process the nodes started (as their disks show) was recorded as
  started, or was placed on a node the log then declared lost (which accounts for whatever
  ran there): one the log never knew of could hold a GPU the log gave to another job.
"""

from collections.abc import Iterable, Mapping, Sequence

import msgspec

from allot.core import State, apply_record
from allot.core.fold import LogRecord
from allot.core.replay import verify
from allot.proto.events import (
    JobCheckpointed,
    JobExited,
    JobStarted,
    NodeLost,
    submissions,
)

Gpu = tuple[str, int]  # (node id, GPU index)
Attempt = tuple[str, int, str]  # (job id, attempt, node id)


class Finding(msgspec.Struct, frozen=True, kw_only=True):
    invariant: str
    job_id: str
    seq: int  # where it was seen (0: at the end of the log)
    detail: str


class Verdict(msgspec.Struct, kw_only=True):
    events: int = 0
    jobs: int = 0
    acknowledged: int = 0
    lost: int = 0  # acknowledged, not in the log
    duplicated: int = 0  # acknowledged, in the log more than once
    not_ended: int = 0
    nodes_lost: int = 0  # NodeLost events: an agent down longer than the node timeout
    ended: dict[str, int] = {}  # end state -> jobs
    plans_verified: int = 0
    findings: list[Finding] = []

    @property
    def passed(self) -> bool:
        return not self.findings


def check(
    records: Sequence[LogRecord],
    acknowledged: Mapping[str, str],
    code_version: str | None = None,
    ran: Iterable[Attempt] = (),
) -> Verdict:
    """Check ``records`` (the whole log, in order) against every invariant.
    ``acknowledged``: idempotency key -> the job id its client was given. With
    ``code_version``, every plan is also recomputed (``allot replay --verify``). ``ran``:
    the attempts whose processes the nodes' disks show were started, each of which the log
    must have recorded as started (``known-process``)."""
    verdict = Verdict(acknowledged=len(acknowledged))
    walk = _Walk(verdict.findings)
    for record in records:
        walk.step(record)
    verdict.events = len(records)
    _check_acknowledged(walk.submissions, acknowledged, verdict)
    _check_ended(walk.state, verdict)
    verdict.nodes_lost = walk.nodes_lost
    for job_id, attempt, node_id in sorted(set(ran) - set(walk.pids) - walk.lost_with_node):
        detail = f"attempt {attempt} ran on {node_id}; the log never recorded its start"
        verdict.findings.append(
            Finding(invariant="known-process", job_id=job_id, seq=0, detail=detail)
        )
    if code_version is not None:
        _check_replay(records, code_version, verdict)
    return verdict


class _Walk:
    """The fold, and beside it what the raw events say that the fold would pass over (it
    ignores a second start or an old checkpoint, rightly: here they are the evidence)."""

    def __init__(self, findings: list[Finding]):
        self.state = State()
        self.findings = findings
        self.submissions: dict[str, list[tuple[int, str]]] = {}  # key -> (seq, job id)
        self.pids: dict[Attempt, int] = {}  # the process each attempt started
        self.processes: dict[Gpu, tuple[str, int]] = {}  # GPU -> (job id, attempt) running
        # Job id -> the highest checkpoint step recorded, and when its agent saw it.
        self.checkpoints: dict[str, tuple[int, int]] = {}
        self.noted: set[tuple[str, str, str]] = set()
        self.nodes_lost = 0
        # Attempts placed on a node when it was declared lost: the log accounts for
        # whatever they ran there as lost with the node.
        self.lost_with_node: set[Attempt] = set()

    def step(self, record: LogRecord) -> None:
        event = record.event
        if submitted := submissions(event):
            for job in submitted:
                if job.idempotency_key is not None:
                    entry = (record.seq, job.job_id)
                    self.submissions.setdefault(job.idempotency_key, []).append(entry)
        elif isinstance(event, JobStarted):
            self._started(record.seq, event)
        elif isinstance(event, JobExited):
            self._exited(event)
        elif isinstance(event, JobCheckpointed) and event.step is not None:
            self._checkpointed(record.seq, event)
        elif isinstance(event, NodeLost):
            self._node_lost(event.node_id)
        apply_record(self.state, record)
        self._check_holders(record.seq)

    def _node_lost(self, node_id: str) -> None:
        """What ran there is gone as far as the log knows (its agent kills whatever it
        finds of it on its return), reported or not."""
        self.nodes_lost += 1
        for gpu in [g for g in self.processes if g[0] == node_id]:
            del self.processes[gpu]
        for job_id in self.state.holders:
            job = self.state.jobs[job_id]
            if node_id in job.placements:
                self.lost_with_node.add((job_id, job.attempts, node_id))

    def _note(self, invariant: str, job_id: str, seq: int, detail: str) -> None:
        if (invariant, job_id, detail) not in self.noted:  # a breach that lasts, once
            self.noted.add((invariant, job_id, detail))
            self.findings.append(
                Finding(invariant=invariant, job_id=job_id, seq=seq, detail=detail)
            )

    def _started(self, seq: int, e: JobStarted) -> None:
        attempt = (e.job_id, e.attempt, e.node_id)
        earlier = self.pids.setdefault(attempt, e.pid)
        if earlier != e.pid:
            self._note(
                "started-once",
                e.job_id,
                seq,
                f"attempt {e.attempt} started again on {e.node_id}: pid {e.pid} after {earlier}",
            )
        for index in e.gpus:
            holder = self.processes.get((e.node_id, index))
            if holder is not None and holder[0] != e.job_id:
                self._note(
                    "one-holder",
                    e.job_id,
                    seq,
                    f"started on {e.node_id} GPU {index} while {holder[0]} runs there",
                )
            self.processes[(e.node_id, index)] = (e.job_id, e.attempt)

    def _exited(self, e: JobExited) -> None:
        for gpu, holder in list(self.processes.items()):
            if gpu[0] == e.node_id and holder == (e.job_id, e.attempt):
                del self.processes[gpu]

    def _checkpointed(self, seq: int, e: JobCheckpointed) -> None:
        assert e.step is not None
        highest = self.checkpoints.get(e.job_id)
        if highest is None or e.step > highest[0]:
            self.checkpoints[e.job_id] = (e.step, e.meta.at)
        elif e.meta.at >= highest[1]:
            detail = f"checkpoint {e.step} seen after checkpoint {highest[0]} was recorded"
            self._note("checkpoint-kept", e.job_id, seq, detail)

    def _check_holders(self, seq: int) -> None:
        """No job holds a GPU (admitted or running there, as the fold has it) on which the
        process of another job was started and has not ended. (The fold itself never
        allots a GPU twice: an admission onto a held GPU is ignored; what it cannot see is
        a process that outlives the fold's release.)"""
        for job_id in self.state.holders:
            for node_id, gpus in self.state.jobs[job_id].placements.items():
                for index in gpus:
                    running = self.processes.get((node_id, index))
                    if running is not None and running[0] != job_id:
                        detail = f"holds {node_id} GPU {index} while {running[0]} runs there"
                        self._note("one-holder", job_id, seq, detail)


def _check_acknowledged(
    submissions: Mapping[str, list[tuple[int, str]]],
    acknowledged: Mapping[str, str],
    verdict: Verdict,
) -> None:
    for key, job_id in sorted(acknowledged.items()):
        found = submissions.get(key, [])
        if not found:
            verdict.lost += 1
            detail = f"acknowledged under key {key}, not in the log"
            verdict.findings.append(
                Finding(invariant="acknowledged", job_id=job_id, seq=0, detail=detail)
            )
            continue
        if len(found) > 1:
            verdict.duplicated += 1
            seqs = ", ".join(str(seq) for seq, _ in found)
            detail = f"key {key} submitted {len(found)} times (sequences {seqs})"
            verdict.findings.append(
                Finding(invariant="acknowledged", job_id=job_id, seq=found[1][0], detail=detail)
            )
        for seq, logged in found:
            if logged != job_id:
                detail = f"key {key} acknowledged as {job_id}, logged as {logged}"
                verdict.findings.append(
                    Finding(invariant="acknowledged", job_id=job_id, seq=seq, detail=detail)
                )


def _check_ended(state: State, verdict: Verdict) -> None:
    verdict.jobs = len(state.jobs)
    ended: dict[str, int] = {}
    for job_id, job in state.jobs.items():
        if job.status.terminal:
            ended[str(job.status)] = ended.get(str(job.status), 0) + 1
            continue
        verdict.not_ended += 1
        detail = f"still {job.status} at the end of the log"
        verdict.findings.append(Finding(invariant="ended", job_id=job_id, seq=0, detail=detail))
    verdict.ended = dict(sorted(ended.items()))


def _check_replay(records: Sequence[LogRecord], code_version: str, verdict: Verdict) -> None:
    def every() -> Iterable[LogRecord]:
        return records

    # The plans are picked from the whole log (any superset of the plan subject will do).
    result = verify(records, records, code_version, reread=every)
    verdict.plans_verified = result.plans
    for divergence in result.divergences:
        jobs = ", ".join(divergence.jobs) or "-"
        detail = "; ".join(divergence.diff)[:500]
        verdict.findings.append(
            Finding(invariant="replay", job_id=jobs, seq=divergence.seq, detail=detail)
        )
