"""A snapshot of the folded state: ``State`` at a known sequence, as bytes, and back.

A service restarted on a long log starts from a snapshot and folds only the tail
(docs/adr/0024). The bytes are MessagePack of typed structs, decoded with those types: a
snapshot is read off the bus, so a corrupt or forged one fails to decode, with the field it
broke on, instead of becoming a state. It records the sequence it is true at and the
version of the decision code that wrote it; a reader trusts it only if that is its own.

What the state derives only for its readers' convenience is not stored: the change feed
(``State.holder_changes``) starts empty, so a view built on it reads everything once, as
it would after a refold; the rates owed accrues at (``State.owed_rates``) are computed
again. Everything else is stored exactly, in its order: the order of a dict is part of
what a plan iterates over.
"""

from typing import Final

import msgspec

from allot.core.model import (
    AccountUsage,
    ArrayRecord,
    Budget,
    ChangeFeed,
    IgnoredEvent,
    JobRecord,
    JobStatus,
    NodeRecord,
    QueueEntry,
    State,
    UnbilledRun,
)
from allot.proto.events import AccountSettings, Placement

FORMAT: Final = 3  # bumped when the layout below changes in a way old readers cannot read

Queue = list[QueueEntry]
Group = tuple[str, str]  # (tier, account)


class StateImage(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Every field of ``State`` a fold writes, typed as ``State`` holds it. Maps keyed by
    tuples are lists of pairs: MessagePack keys are decoded as lists otherwise."""

    seq: int
    jobs: dict[str, JobRecord]
    arrays: dict[str, ArrayRecord]
    nodes: dict[str, NodeRecord]
    pending: list[str]
    queues: list[tuple[Group, Queue]]
    sized_queues: list[tuple[int, list[tuple[Group, Queue]]]]
    waiting_runtimes: list[int]
    unstated: list[str]
    idempotency: list[tuple[tuple[str, str, str], str]]
    accounts: dict[str, AccountSettings]
    job_accounts: list[str]
    unbilled: list[tuple[tuple[str, int], UnbilledRun]]
    usage: dict[str, AccountUsage]
    budgets: dict[str, Budget]
    wanted: dict[str, int]
    wanted_version: int
    owed: dict[str, AccountUsage]
    owed_until: int
    holders: dict[str, dict[str, int]]
    quota_used: dict[str, dict[str, int]]
    holds: dict[str, list[Placement]]
    stopped: list[str]
    policies: dict[str, str]
    fair_share_version: int
    usage_version: int
    owed_version: int
    nodes_version: int
    holders_version: int
    ignored: list[IgnoredEvent]
    ignored_count: int
    last_plan_seq: int
    quarantined: dict[int, str]
    refolds: int


class Snapshot(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """What is stored: where the state is true, who made it, and the state itself (left
    undecoded until the first two have been checked)."""

    format: int
    seq: int
    code_version: str
    state: msgspec.Raw


class SnapshotError(ValueError):
    """Bytes that are not a snapshot this code may start from; the message says why."""


def encode_snapshot(state: State, code_version: str) -> bytes:
    """``state`` as a snapshot written by ``code_version``. A state waiting for a refold
    is not yet what its sequence says, so it has none."""
    snapshot = Snapshot(
        format=FORMAT,
        seq=state.seq,
        code_version=code_version,
        state=msgspec.Raw(encode_state(state)),
    )
    return _encoder.encode(snapshot)


def encode_state(state: State) -> bytes:
    """The state part of a snapshot of ``state``: equal bytes, equal states."""
    if state.refold_due:
        raise SnapshotError(f"the state at sequence {state.seq} waits for a refold")
    image = StateImage(
        seq=state.seq,
        jobs=state.jobs,
        arrays=state.arrays,
        nodes=state.nodes,
        pending=list(state.pending),
        queues=list(state.queues.items()),
        sized_queues=[(gpus, list(by.items())) for gpus, by in state.sized_queues.items()],
        waiting_runtimes=state.waiting_runtimes,
        unstated=list(state.unstated),
        idempotency=list(state.idempotency.items()),
        accounts=state.accounts,
        job_accounts=list(state.job_accounts),
        unbilled=list(state.unbilled.items()),
        usage=state.usage,
        budgets=state.budgets,
        wanted=state.wanted,
        wanted_version=state.wanted_version,
        owed=state.owed,
        owed_until=state.owed_until,
        holders=state.holders,
        quota_used=state.quota_used,
        holds=state.holds,
        stopped=list(state.stopped),
        policies=state.policies,
        fair_share_version=state.fair_share_version,
        usage_version=state.usage_version,
        owed_version=state.owed_version,
        nodes_version=state.nodes_version,
        holders_version=state.holders_version,
        ignored=state.ignored,
        ignored_count=state.ignored_count,
        last_plan_seq=state.last_plan_seq,
        quarantined=state.quarantined,
        refolds=state.refolds,
    )
    try:
        return _encoder.encode(image)
    except OverflowError:  # sums of forged quantities can pass what MessagePack holds
        raise SnapshotError(
            f"the state at sequence {state.seq} holds a number past 64 bits, which a "
            "snapshot cannot hold"
        ) from None


def read_header(data: bytes) -> Snapshot:
    """The snapshot's sequence and version, its state not yet decoded."""
    try:
        snapshot = _snapshot_decoder.decode(data)
    except msgspec.DecodeError as error:
        raise SnapshotError(f"not a snapshot: {error}") from None
    if snapshot.format != FORMAT:
        raise SnapshotError(f"format {snapshot.format}; this code reads format {FORMAT}")
    return snapshot


def decode_snapshot(data: bytes, code_version: str) -> State:
    """The state a snapshot holds, if ``code_version`` wrote it; else ``SnapshotError``."""
    snapshot = read_header(data)
    if snapshot.code_version != code_version:
        raise SnapshotError(
            f"written by code version {snapshot.code_version!r}, not {code_version!r}"
        )
    try:
        image = _image_decoder.decode(snapshot.state)
    except msgspec.DecodeError as error:
        raise SnapshotError(f"its state does not decode: {error}") from None
    if image.seq != snapshot.seq:
        raise SnapshotError(f"its state is at sequence {image.seq}, not {snapshot.seq}")
    state = _state(image)
    problem = _impossible(state)
    if problem is not None:
        raise SnapshotError(f"its state is not one a fold makes: {problem}")
    return state


def differences(stored: bytes, folded: bytes) -> list[str]:
    """The fields in which two states (``encode_state``) differ; every field when the
    stored one does not decode."""
    try:
        was = _image_decoder.decode(stored)
    except msgspec.DecodeError:
        return list(StateImage.__struct_fields__)
    now = _image_decoder.decode(folded)
    return [f for f in StateImage.__struct_fields__ if getattr(was, f) != getattr(now, f)]


def _impossible(state: State) -> str | None:
    """What in ``state`` no fold makes, of what planning looks up by key (a forged but
    well-typed snapshot would fail every cycle with a KeyError, or mislead it); None if
    nothing. The indexes of the waiting jobs must be the ones their records make."""
    if not 0 <= state.last_plan_seq <= state.seq:
        return f"last_plan_seq={state.last_plan_seq}: not within 0 to its sequence {state.seq}"
    if any(not 1 <= seq <= state.seq for seq in state.quarantined):
        return f"quarantined: a sequence not within 1 to {state.seq}"
    waiting = {
        j for j, job in state.jobs.items() if job.status is JobStatus.PENDING and not job.array_held
    }
    if state.pending.keys() != waiting:
        return "pending: not the jobs whose status is pending"
    if problem := _impossible_arrays(state):
        return problem
    rebuilt = State()
    for job_id in state.pending:
        rebuilt.enqueue(state.jobs[job_id])
    for name in ("queues", "sized_queues", "waiting_runtimes"):
        if getattr(state, name) != getattr(rebuilt, name):
            return f"{name}: not those of the pending jobs"
    if not state.unstated.keys() <= state.pending.keys():
        return "unstated: a job that is not pending"
    holders = {j for j, job in state.jobs.items() if job.status.holds_gpus}
    if state.holders.keys() != holders:
        return "holders: not the jobs that hold GPUs"
    for node_id, node in state.nodes.items():
        for index, job_id in node.allocated.items():
            if job_id not in holders:
                return f"nodes[{node_id}].allocated: GPU {index} held by {job_id}"
    for job_id in holders:
        if not state.jobs[job_id].placements.keys() <= state.nodes.keys():
            return f"jobs[{job_id}].placements: a node that is not known"
    for name, ids in (
        ("holds", list(state.holds)),
        ("stopped", list(state.stopped)),
        ("idempotency", [j for j in state.idempotency.values() if j not in state.arrays]),
        ("unbilled", [job_id for job_id, _ in state.unbilled]),
    ):
        unknown = next((job_id for job_id in ids if job_id not in state.jobs), None)
        if unknown is not None:
            return f"{name}: unknown job {unknown}"
    return None


def _impossible_arrays(state: State) -> str | None:
    """What in the arrays no fold makes: a task that is not the array's job, a held task
    the array has released or one not released that is neither held nor ended, a count of
    released tasks past its end, a count of active ones that is not those not ended (the
    array would release too many, or never another)."""
    arrays = state.arrays
    orphan = next(
        (j for j in state.jobs.values() if j.array_id is not None and j.array_id not in arrays),
        None,
    )
    if orphan is not None:
        return f"jobs[{orphan.job_id}].array_id: no array {orphan.array_id}"
    for array_id, array in state.arrays.items():
        if not 0 <= array.released <= len(array.tasks):
            return f"arrays[{array_id}].released: not within 0 to its {len(array.tasks)} tasks"
        for n, job_id in enumerate(array.tasks):
            job = state.jobs.get(job_id)
            if job is None or job.array_id != array_id:
                return f"arrays[{array_id}].tasks: {job_id} is no task of it"
            if job.array_held and (n < array.released or job.status is not JobStatus.PENDING):
                return f"jobs[{job_id}].array_held: a task its array released, or not pending"
            if n >= array.released and not (job.array_held or job.status.terminal):
                return f"jobs[{job_id}]: a task its array has not released, neither held nor ended"
        live = sum(not state.jobs[j].status.terminal for j in array.tasks[: array.released])
        if array.active != live:
            return (
                f"arrays[{array_id}].active: {array.active}, but {live} of its released tasks "
                "have not ended"
            )
    return None


def _state(image: StateImage) -> State:
    state = State()
    state.seq = image.seq
    state.jobs = image.jobs
    state.arrays = image.arrays
    for array in image.arrays.values():  # one spec for all its tasks, as the fold made it
        for job_id in array.tasks:
            job = image.jobs.get(job_id)
            if job is not None and job.spec == array.spec:
                job.spec = array.spec
    state.nodes = image.nodes
    state.pending = dict.fromkeys(image.pending)
    state.queues = dict(image.queues)
    state.sized_queues = {gpus: dict(by) for gpus, by in image.sized_queues}
    state.waiting_runtimes = image.waiting_runtimes
    state.unstated = dict.fromkeys(image.unstated)
    state.idempotency = dict(image.idempotency)
    state.accounts = image.accounts
    state.job_accounts = dict.fromkeys(image.job_accounts)
    state.unbilled = dict(image.unbilled)
    state.usage = image.usage
    state.budgets = image.budgets
    state.wanted = image.wanted
    state.wanted_version = image.wanted_version
    state.owed = image.owed
    state.owed_until = image.owed_until
    state.holders = image.holders
    state.quota_used = image.quota_used
    state.holds = image.holds
    state.stopped = dict.fromkeys(image.stopped)
    state.policies = image.policies
    state.fair_share_version = image.fair_share_version
    state.usage_version = image.usage_version
    state.owed_version = image.owed_version
    state.nodes_version = image.nodes_version
    state.holders_version = image.holders_version
    state.holder_changes = ChangeFeed()
    state.ignored = image.ignored
    state.ignored_count = image.ignored_count
    state.last_plan_seq = image.last_plan_seq
    state.quarantined = image.quarantined
    state.refolds = image.refolds
    return state


_encoder = msgspec.msgpack.Encoder()
_snapshot_decoder = msgspec.msgpack.Decoder(Snapshot)
_image_decoder = msgspec.msgpack.Decoder(StateImage)
