"""What the fold holds an event to before it applies it.

A service writes only well-formed events, but the log takes what its writers send: a bug,
a forged message or a compromised node can append anything the schema can decode. Each
check here refuses values that no honest producer writes (a job of zero GPUs, a budget
period of zero, a negative charge, a node that lists a GPU twice), so the rules that fold
an event never meet them. A submission is held to the intake's own checks of a spec.
"""

from collections.abc import Callable
from typing import Any

from allot.core.arrays import array_problems, task_id
from allot.core.validate import is_account_path, spec_problems
from allot.proto.events import (
    AccountDefined,
    AccountSettings,
    AccountUpdated,
    Admission,
    ArraySubmitted,
    BudgetExhausted,
    BudgetGranted,
    Event,
    EventQuarantined,
    GraceTooShort,
    Hold,
    JobCheckpointed,
    JobEvent,
    JobExited,
    JobPreempted,
    JobsSubmitted,
    JobStarted,
    JobSubmitted,
    KillRequested,
    MaxWaitExceeded,
    NodeEvent,
    NodeHealthChanged,
    NodeLost,
    NodeRegistered,
    PlanComputed,
    StopRequested,
    UsageCharged,
)
from allot.proto.limits import MAX_BATCH_JOBS, MAX_GRACE_NS, MAX_REASON
from allot.proto.subjects import MAX_ID, is_id

MAX_QUANTITY = (1 << 63) - 1  # nanoseconds, milliseconds, MiB: what a signed 64-bit integer holds
MAX_NODE_GPUS = 1024
MAX_UUID = 128  # characters of a GPU's UUID, model or PCI bus id
MAX_PROBLEMS = 1024  # lines of a node's inventory problems
MAX_NODE_CPUS = 1 << 20
MAX_ACCOUNT_WEIGHT = 1 << 30
# A budget's period is split into per-period sums, a charge into the hours it spans: both
# are bounded so that one forged event cannot make a fold loop for hours.
MIN_PERIOD_NS = 10**9  # as the ledger grants
MAX_CHARGE_NS = 366 * 86400 * 10**9
ID_RULE = f"letters, digits, '_' and '-', at most {MAX_ID} of them"


def problem(event: Event) -> str:
    """Why ``event`` cannot be folded whatever the state ("" when it can)."""
    if not 0 <= event.meta.at <= MAX_QUANTITY:
        return f"meta.at={event.meta.at}: a time in nanoseconds since 1970"
    # Services name subjects, files and directories after these ids.
    if isinstance(event, JobEvent) and not is_id(event.job_id):
        return f"job_id={event.job_id[:200]!r}: {ID_RULE}"
    if isinstance(event, NodeEvent) and not is_id(event.node_id):
        return f"node_id={event.node_id[:200]!r}: {ID_RULE}"
    check = _CHECKS.get(type(event))
    return check(event) if check is not None else ""


def _count(name: str, value: int | None, low: int = 0, high: int = MAX_QUANTITY) -> str:
    if value is None or low <= value <= high:
        return ""
    return f"{name}={value}: from {low} to {high}"


def _first(*problems: str) -> str:
    return next((p for p in problems if p), "")


def _submitted(e: JobSubmitted) -> str:
    errors = spec_problems(e.spec)
    return str(errors[0]) if errors else ""


def _array_submitted(e: ArraySubmitted) -> str:
    errors = spec_problems(e.spec) + array_problems(e.array)
    if errors:
        return str(errors[0])
    longest = task_id(e.job_id, max(r.last for r in e.array.indices))
    return "" if is_id(longest) else f"job_id={e.job_id[:200]!r}: its tasks' ids ({longest}) too"


def _batch(e: JobsSubmitted) -> str:
    """The batch as a whole; each of its submissions is held to its own check as it folds."""
    return _count("len(jobs)", len(e.jobs), 1, MAX_BATCH_JOBS)


def _attempt(e: Any) -> str:
    return _count("attempt", e.attempt)


# The checks of the most frequent events first ask, in one expression, whether all is well,
# and only then work out what is not: a fold reads millions of them.


def _started(e: JobStarted) -> str:
    if e.gpu_uuids and (
        len(e.gpu_uuids) != len(e.gpus) or any(len(u) > MAX_UUID for u in e.gpu_uuids)
    ):
        return f"gpu_uuids: one of at most {MAX_UUID} characters for each of the gpus"
    if 0 <= e.attempt <= MAX_QUANTITY and 0 <= e.pid <= 1 << 31:
        return ""
    return _first(_attempt(e), _count("pid", e.pid, 0, 1 << 31))  # 0: simulated


def _checkpointed(e: JobCheckpointed) -> str:
    return "" if e.step is None or 1 <= e.step <= MAX_QUANTITY else _count("step", e.step, 1)


def _exited(e: JobExited) -> str:
    # Exit codes are what wait() reports: 0..255, or minus a signal number.
    stopped_in = e.stopped_in_ns
    if (
        0 <= e.attempt <= MAX_QUANTITY
        and (e.exit_code is None or -128 <= e.exit_code <= 255)
        and (stopped_in is None or 0 <= stopped_in <= MAX_QUANTITY)
    ):
        return ""
    return _first(
        _attempt(e),
        _count("exit_code", e.exit_code, -128, 255),
        _count("stopped_in_ns", e.stopped_in_ns),
    )


def _stop(e: StopRequested) -> str:
    return _first(_attempt(e), _count("grace_ns", e.grace_ns, 0, MAX_GRACE_NS))


def _preempted(e: JobPreempted) -> str:
    return _first(
        _attempt(e),
        _count("lost_gpu_ms", e.lost_gpu_ms),
        _count("checkpoint_age_ns", e.checkpoint_age_ns),
        _count("grace_used_ns", e.grace_used_ns),
    )


def _grace_too_short(e: GraceTooShort) -> str:
    return _first(_count("grace_ns", e.grace_ns), _count("measured_ns", e.measured_ns))


def _max_wait(e: MaxWaitExceeded) -> str:
    return _first(
        _attempt(e), _count("waited_ns", e.waited_ns), _count("max_wait_ns", e.max_wait_ns)
    )


def _plan(e: PlanComputed) -> str:
    for admission in e.admissions:
        if not admission.placements:
            return f"admission of {admission.job_id}: no placements"
    placed: list[Admission | Hold] = [*e.admissions, *e.holds]
    for decision in placed:
        for placement in decision.placements:
            if any(not 0 <= index < MAX_NODE_GPUS for index in placement.gpus):
                return f"placement of {decision.job_id} on {placement.node_id}: no such GPU index"
    return _count("now", e.now)


def _registered(e: NodeRegistered) -> str:
    indices = [gpu.index for gpu in e.gpus]
    if len(indices) > MAX_NODE_GPUS or any(not 0 <= i < MAX_NODE_GPUS for i in indices):
        return f"gpus: at most {MAX_NODE_GPUS}, indices from 0 to {MAX_NODE_GPUS - 1}"
    if len(set(indices)) != len(indices):
        return f"gpus: index listed twice in {sorted(indices)}"
    if any(gpu.memory_mib < 0 or gpu.memory_mib > MAX_QUANTITY for gpu in e.gpus):
        return "gpus: memory_mib must be 0 or more"
    for gpu in e.gpus:
        if len(gpu.uuid) > MAX_UUID or len(gpu.pci_bus_id) > MAX_UUID or len(gpu.model) > MAX_UUID:
            return f"gpus: GPU {gpu.index}'s model, uuid and pci_bus_id take {MAX_UUID} characters"
        if gpu.parent is not None and not 0 <= gpu.parent < MAX_NODE_GPUS:
            return f"gpus: GPU {gpu.index}'s parent={gpu.parent} is no GPU index"
    if len(e.problems) > MAX_PROBLEMS or any(len(p) > MAX_REASON for p in e.problems):
        return f"problems: at most {MAX_PROBLEMS}, of {MAX_REASON} characters each"
    in_islands = [i for island in e.nvlink_islands for i in island]
    if len(set(in_islands)) != len(in_islands) or not set(in_islands) <= set(indices):
        return f"nvlink_islands={e.nvlink_islands}: disjoint lists of the node's GPU indices"
    return _first(_count("cpus", e.cpus, 0, MAX_NODE_CPUS), _count("memory_mib", e.memory_mib))


def _health(e: NodeHealthChanged) -> str:
    if e.gpu is not None and not 0 <= e.gpu < MAX_NODE_GPUS:
        return f"gpu={e.gpu}: GPU indices are 0 to {MAX_NODE_GPUS - 1}"
    return ""


def _lost(e: NodeLost) -> str:
    return _first(_count("last_seen_ns", e.last_seen_ns), _count("timeout_ns", e.timeout_ns))


def _account_path(path: str) -> str:
    if is_account_path(path):
        return ""
    return f"path={path[:200]!r}: not an account path"


def _settings(settings: AccountSettings) -> str:
    limits = (settings.quota, settings.borrowing_limit, settings.lending_limit)
    for amounts in limits:
        for resource, amount in amounts.items():
            if problem := _count(resource, amount):
                return problem
    return _first(
        _count("weight", settings.weight, 1, MAX_ACCOUNT_WEIGHT),
        _count("max_wait_ns", settings.max_wait_ns),
    )


def _account(e: AccountDefined | AccountUpdated) -> str:
    return _first(_account_path(e.path), _settings(e.settings))


def _budget(e: BudgetGranted) -> str:
    return _first(
        _account_path(e.path),
        _count("gpu_ms", e.gpu_ms),
        _count("period_ns", e.period_ns, MIN_PERIOD_NS),
        _count("starts_at", e.starts_at),
        _count("share_ppm", e.share_ppm, 0, 1_000_000),
    )


def _exhausted(e: BudgetExhausted) -> str:
    return _first(
        _count("period", e.period),
        _count("used_gpu_ms", e.used_gpu_ms),
        _count("budget_gpu_ms", e.budget_gpu_ms),
    )


def _charged(e: UsageCharged) -> str:
    if (
        0 <= e.attempt <= MAX_QUANTITY
        and 0 <= e.from_ns <= e.to_ns <= min(e.from_ns + MAX_CHARGE_NS, MAX_QUANTITY)
        and 0 <= e.gpu_ms <= MAX_QUANTITY
        and is_account_path(e.path)
    ):
        return ""
    return _first(
        _account_path(e.path),
        _attempt(e),
        _count("from_ns", e.from_ns),
        _count("to_ns", e.to_ns, e.from_ns, e.from_ns + MAX_CHARGE_NS),
        _count("gpu_ms", e.gpu_ms),
    )


def _quarantined(e: EventQuarantined) -> str:
    return _count("seq", e.seq, 1)


_CHECKS: dict[type[Event], Callable[[Any], str]] = {
    JobSubmitted: _submitted,
    ArraySubmitted: _array_submitted,
    JobsSubmitted: _batch,
    JobStarted: _started,
    JobCheckpointed: _checkpointed,
    JobExited: _exited,
    StopRequested: _stop,
    KillRequested: _attempt,
    JobPreempted: _preempted,
    GraceTooShort: _grace_too_short,
    MaxWaitExceeded: _max_wait,
    PlanComputed: _plan,
    NodeRegistered: _registered,
    NodeHealthChanged: _health,
    NodeLost: _lost,
    AccountDefined: _account,
    AccountUpdated: _account,
    BudgetGranted: _budget,
    BudgetExhausted: _exhausted,
    UsageCharged: _charged,
    EventQuarantined: _quarantined,
}
