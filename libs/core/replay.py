"""Replay: prove every recorded decision from the log (R20).

``verify`` folds the log from its first event and, whenever the fold reaches a plan's
``basis_seq``, recomputes that plan with its recorded ``now`` and the policy its hash names
(from ``PolicyAdopted``); when the fold then reaches the recorded plan, the two are
compared field by field. It needs the plans before the fold (to know where each one's
basis is), so it reads the log twice: the plan subject first, then everything.

Verification stops at the first divergence: every later plan was made on a state that
decision shaped, so later differences would only echo it.

Given snapshots of the state (``allot.core.snapshot``), it also checks that each one is the
fold of the log up to its sequence: a service would start from it, so a snapshot that is
not is a divergence, named with its sequence. One written by other code is not trusted by
any service; it is reported, not checked.

``state_at`` folds up to a sequence or a moment: the cluster as it was then.

Where the start of the log was archived, both begin from ``base``, the state the rest of
the log begins from; a plan made on a basis before it cannot be recomputed, and is counted
as such.

Both fold a quarantine as the services do: at ``EventQuarantined`` the log up to it is folded
again without the quarantined events, read anew from ``reread`` (by default ``records``
once more, which must then be a collection, not a one-pass iterator).
"""

from collections.abc import Callable, Iterable

import msgspec

from allot.core.fold import LogRecord, apply_record, refold
from allot.core.model import State
from allot.core.planning import DEFAULT_POLICY, Plan, PlanMemo, Policy, plan, policy_hash
from allot.core.snapshot import SnapshotError, differences, encode_state, read_header
from allot.proto.events import PlanComputed, PolicyAdopted
from allot.proto.limits import MAX_EVENT_BYTES, check_json


class Divergence(msgspec.Struct, frozen=True, kw_only=True):
    """A recorded plan that the current code, from the same basis, does not reproduce."""

    seq: int
    jobs: list[str]  # the jobs whose decisions differ
    diff: list[str]  # readable lines: what was recorded, what was recomputed


class Verification(msgspec.Struct, kw_only=True):
    events: int = 0
    plans: int = 0  # plans recomputed and compared
    divergences: list[Divergence] = []
    warnings: list[str] = []
    snapshots: int = 0  # snapshots checked against the fold


Reread = Callable[[], Iterable[LogRecord]]
Base = Callable[[], State]  # a fresh copy, each call, of the state an archived log leaves


def verify(
    plan_records: Iterable[LogRecord],
    records: Iterable[LogRecord],
    code_version: str,
    reread: Reread | None = None,
    progress: Callable[[int, int | None], None] | None = None,
    snapshots: Iterable[tuple[str, bytes]] = (),
    base: Base | None = None,
) -> Verification:
    """Recompute and compare every plan. ``plan_records``: the records of the plan subject
    (or any superset); ``records``: the whole log, in order. ``progress(events, None)`` is
    told after each event folded. ``snapshots``: (name, bytes) of each to check. ``base``:
    where the log's start was archived, the state the rest begins from."""
    result = Verification()
    checks = _snapshot_checks(snapshots, code_version, result)
    policies: dict[str, Policy] = {policy_hash(DEFAULT_POLICY): DEFAULT_POLICY}
    by_basis: dict[int, list[tuple[int, PlanComputed]]] = {}
    versions: set[str] = set()
    for record in plan_records:
        event = record.event
        if isinstance(event, PolicyAdopted):
            adopted = adopted_policy(event.policy_json, event.policy_hash)
            if adopted is None:
                result.warnings.append(f"policy {event.policy_hash} at {record.seq} is unreadable")
            else:
                policies[event.policy_hash] = adopted
        elif isinstance(event, PlanComputed) and event.basis_seq < record.seq:
            by_basis.setdefault(event.basis_seq, []).append((record.seq, event))
            versions.add(event.code_version)
    result.warnings += [
        f"plans were made by code version {v}; this is {code_version}: verifying anyway"
        for v in sorted(versions - {code_version})
    ]
    state = base() if base is not None else State()
    memo = PlanMemo(state)
    for hashed, settings in state.policies.items():  # adopted in what was archived
        if hashed not in policies and (adopted := adopted_policy(settings, hashed)):
            policies[hashed] = adopted
    unknown = sorted({p.policy_hash for ps in by_basis.values() for _, p in ps} - set(policies))
    result.warnings += [
        f"policy {h} is not in the log: those plans are verified with the default policy"
        for h in unknown
    ]
    expected: dict[int, tuple[PlanComputed, Plan]] = {}
    # Plans made on a basis before the archive's end: their basis is no longer there.
    archived = {seq for basis, ps in by_basis.items() if basis < state.seq for seq, _ in ps}
    if archived:
        result.warnings.append(
            f"{len(archived)} plans were made on a basis before sequence {state.seq}, "
            "which was archived: not recomputed"
        )

    def recompute(basis: int) -> None:
        for seq, recorded in by_basis.pop(basis, []):
            policy = policies.get(recorded.policy_hash, DEFAULT_POLICY)
            expected[seq] = (recorded, plan(state, recorded.now, policy, memo))

    recompute(state.seq)
    if (divergence := _check_snapshots(checks, state, result)) is not None:
        result.divergences.append(divergence)
        return result
    for record in records:
        if record.seq <= state.seq:
            continue  # in the archive's base already
        divergence = None
        if record.seq in expected:
            recorded, recomputed = expected.pop(record.seq)
            result.plans += 1
            divergence = compare(record.seq, recorded, recomputed)
        elif record.type == _PLAN and record.seq not in archived:
            # Unreadable, not found by the first pass, or based on what came after it:
            # a decision that cannot be checked is not a proven one.
            why = record.error or f"a plan the log cannot justify (basis {_basis(record)})"
            divergence = Divergence(seq=record.seq, jobs=[], diff=[why])
        if divergence is not None:
            # What follows was folded from a different decision: it would diverge too,
            # which says nothing more. The first divergence is the finding.
            result.divergences.append(divergence)
            return result
        apply_record(state, record)
        if state.refold_due:
            again = (reread or (lambda: records))()
            state = refold(state, again, base() if base else None)
            memo = PlanMemo(state)
        result.events += 1
        recompute(record.seq)
        if (divergence := _check_snapshots(checks, state, result)) is not None:
            result.divergences.append(divergence)
            return result
        if progress is not None:
            progress(result.events, None)
    for seq, unreached in sorted(checks.items()):
        for name, _ in unreached:
            diff = [f"snapshot {name} at sequence {seq}: the log ends before it"]
            result.divergences.append(Divergence(seq=seq, jobs=[], diff=diff))
    for basis, stranded in sorted(by_basis.items()):
        for seq, _ in stranded:
            if seq in archived:
                continue
            result.divergences.append(
                Divergence(seq=seq, jobs=[], diff=[f"its basis {basis} is not in the log"])
            )
    return result


_PLAN = str(PlanComputed.__struct_config__.tag)


def _snapshot_checks(
    snapshots: Iterable[tuple[str, bytes]], code_version: str, result: Verification
) -> dict[int, list[tuple[str, bytes]]]:
    """Sequence -> the (name, state bytes) of the snapshots to check there."""
    checks: dict[int, list[tuple[str, bytes]]] = {}
    for name, data in snapshots:
        try:
            header = read_header(data)
        except SnapshotError as why:
            result.divergences.append(Divergence(seq=0, jobs=[], diff=[f"snapshot {name}: {why}"]))
            continue
        if header.code_version != code_version:
            result.warnings.append(
                f"snapshot {name} at sequence {header.seq} was written by code version "
                f"{header.code_version}; this is {code_version}: no service starts from it"
            )
            continue
        checks.setdefault(header.seq, []).append((name, bytes(header.state)))
    return checks


def _check_snapshots(
    checks: dict[int, list[tuple[str, bytes]]], state: State, result: Verification
) -> Divergence | None:
    """A divergence if a snapshot at ``state.seq`` is not ``state``; each one checked is
    counted, and checked once."""
    due = checks.pop(state.seq, [])
    folded = encode_state(state) if due else b""
    for name, stored in due:
        if stored != folded:
            fields = ", ".join(differences(stored, folded))
            why = f"snapshot {name} at sequence {state.seq} is not the fold of the log up to it"
            return Divergence(seq=state.seq, jobs=[], diff=[f"{why} (it differs in: {fields})"])
        result.snapshots += 1
    return None


def _basis(record: LogRecord) -> str:
    event = record.event
    return str(event.basis_seq) if isinstance(event, PlanComputed) else "unknown"


def adopted_policy(policy_json: str, hashed: str) -> Policy | None:
    """The policy a planner adopted, if its settings are readable and match its hash."""
    try:
        data = policy_json.encode()
        check_json(data, MAX_EVENT_BYTES)
        policy = msgspec.json.decode(data, type=Policy)
    except msgspec.DecodeError:
        return None
    return policy if policy_hash(policy) == hashed else None


def compare(seq: int, recorded: PlanComputed, recomputed: Plan) -> Divergence | None:
    """The decisions that differ between a recorded plan and its recomputation."""
    diff: list[str] = []
    jobs: set[str] = set()
    for field, key in (
        ("admissions", "job_id"),
        ("pending", "job_id"),
        ("preemptions", "job_id"),
        ("holds", "job_id"),
        ("ranks", "account"),
    ):
        was = {getattr(item, key): item for item in getattr(recorded, field)}
        now = {getattr(item, key): item for item in getattr(recomputed, field)}
        for name in sorted(set(was) | set(now)):
            if was.get(name) != now.get(name):
                diff.append(
                    f"{field} {name}: recorded {_show(was.get(name))}, "
                    f"recomputed {_show(now.get(name))}"
                )
                if key == "job_id":
                    jobs.add(name)
        if [getattr(i, key) for i in getattr(recorded, field)] != [
            getattr(i, key) for i in getattr(recomputed, field)
        ] and not any(d.startswith(field) for d in diff):
            diff.append(f"{field}: the same decisions in another order")
    return Divergence(seq=seq, jobs=sorted(jobs), diff=diff) if diff else None


def _show(item: object) -> str:
    if item is None:
        return "nothing"
    builtins = msgspec.to_builtins(item)
    if isinstance(builtins, dict):
        builtins.pop("job_id", None)
        builtins.pop("account", None)
    return msgspec.json.encode(builtins).decode()


def state_at(
    records: Iterable[LogRecord],
    seq: int | None = None,
    at: int | None = None,
    reread: Reread | None = None,
    base: Base | None = None,
) -> tuple[State, int]:
    """The state after the last event up to sequence ``seq`` or stamped no later than
    ``at`` (UTC ns), and the time of that event; the records after it are not read.
    ``base``: as for ``verify``."""
    state, last = (base() if base is not None else State()), 0
    for record in records:
        if seq is not None and record.seq > seq:
            break
        if record.seq <= state.seq:
            continue
        event = record.event
        if at is not None and event is not None and event.meta.at > at:
            break
        apply_record(state, record)
        if state.refold_due:
            state = refold(state, (reread or (lambda: records))(), base() if base else None)
        if event is not None:
            last = max(last, event.meta.at)
    return state, last
