"""A snapshot of the state: a state restored from one and folded on is the state folded from
the start, byte for byte, and it plans the same; bytes that are not a snapshot of this code
are refused with the reason, never half-decoded."""

import hashlib
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from allot.bus.codec import encode
from allot.bus.eventlog import Record, make_record
from allot.client.bench_replay import write_history
from allot.client.logfile import read_log
from allot.core import (
    DEFAULT_POLICY,
    JobStatus,
    PlanMemo,
    State,
    apply,
    apply_record,
    plan,
    policy_hash,
    refold,
)
from allot.core.replay import Verification, verify
from allot.core.snapshot import (
    FORMAT,
    Snapshot,
    SnapshotError,
    StateImage,
    decode_snapshot,
    encode_snapshot,
    encode_state,
    read_header,
)
from allot.core.wellformed import MAX_QUANTITY
from allot.proto.events import EventQuarantined, Meta, UsageCharged
from allot.proto.subjects import PLAN_EVENTS, subject_for
from tests import builders as b
from tests.builders import fold
from tests.unit.test_read_model_fuzz import PHASES, LogMaker, fold_all

VERSION = "1.0+abc"
S = 10**9


def plans_digest(state: State, now: int, memo: PlanMemo | None = None) -> str:
    """A digest of every decision a plan makes for ``state``, as the planner records it."""
    event = plan(state, now, DEFAULT_POLICY, memo or PlanMemo(state)).recorded(
        Meta(id="plan", at=now, producer="test"),
        basis_seq=state.seq,
        now=now,
        policy=DEFAULT_POLICY.name,
        policy_hash=policy_hash(DEFAULT_POLICY),
        code_version=VERSION,
    )
    return hashlib.sha256(encode(event)).hexdigest()


def restored_and_folded(records: list[Record], split: int) -> State:
    """The log folded up to ``split``, through a snapshot there, then the rest folded."""
    prefix = fold_all(records[:split])
    state = decode_snapshot(encode_snapshot(prefix, VERSION), VERSION)
    for record in records[split:]:
        apply_record(state, record, records)
    return state


@given(st.data())
@settings(max_examples=40, deadline=None, phases=PHASES,
          suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
def test_a_restored_state_folds_and_plans_as_the_whole_log(data: st.DataObject) -> None:
    records = LogMaker(data.draw).make(data.draw(st.integers(10, 60), label="events"))
    split = data.draw(st.integers(0, len(records)), label="split")
    whole = fold_all(records)
    restored = restored_and_folded(records, split)
    assert encode_snapshot(restored, VERSION) == encode_snapshot(whole, VERSION)
    now = (len(records) + 10) * S
    assert plans_digest(restored, now) == plans_digest(whole, now)


def test_a_state_planned_on_before_its_snapshot_plans_the_same_after(tmp_path: Path) -> None:
    """The planner's memo of the state it planned on is no part of the snapshot: a planner
    restarted from one decides as the one that kept planning, at every point of a log
    where plans were made, jobs ran and were charged."""
    records = history(tmp_path, 1500)
    whole = State()
    memo = PlanMemo(whole)
    digests = {}
    for record in records:
        apply_record(whole, record, records)
        if record.seq % 100 == 0:
            digests[record.seq] = plans_digest(whole, record.seq * S, memo)
    for split in (1, 250, 777, 1400):
        restored = restored_and_folded(records, split)
        assert plans_digest(restored, records[-1].seq * S) == digests.get(
            records[-1].seq, plans_digest(whole, records[-1].seq * S, memo)
        )
        assert encode_snapshot(restored, VERSION) == encode_snapshot(whole, VERSION)


def history(tmp_path: Path, events: int, seed: int = 5) -> list[Record]:
    """The seeded history ``allot bench replay`` folds, as records."""
    path = tmp_path / "history.jsonl"
    write_history(path, events, seed)
    return list(read_log(path))


def test_every_field_of_the_state_is_in_the_snapshot_or_rebuilt() -> None:
    """A field added to ``State`` must be stored, or said here to be rebuilt."""
    rebuilt = {"holder_changes", "refold_due", "owed_rates", "cluster_limits"}
    assert set(vars(State())) - rebuilt == set(StateImage.__struct_fields__)


def test_a_snapshot_says_where_it_is_true_and_who_wrote_it(tmp_path: Path) -> None:
    state = fold_all(history(tmp_path, 300))
    header = read_header(encode_snapshot(state, VERSION))
    assert (header.format, header.seq, header.code_version) == (FORMAT, state.seq, VERSION)


def test_a_snapshot_of_other_decision_code_is_refused() -> None:
    data = encode_snapshot(State(), "0.9+old")
    with pytest.raises(SnapshotError, match=r"written by code version '0\.9\+old', not"):
        decode_snapshot(data, VERSION)


@pytest.mark.parametrize("cut", [0, 1, 10, -1])
def test_a_truncated_snapshot_is_refused(tmp_path: Path, cut: int) -> None:
    data = encode_snapshot(fold_all(history(tmp_path, 300)), VERSION)
    with pytest.raises(SnapshotError):
        decode_snapshot(data[:cut], VERSION)


def test_a_snapshot_whose_state_has_wrong_types_is_refused_naming_the_field() -> None:
    image = msgspec.msgpack.decode(_image_bytes(State()))
    image["jobs"] = {"j1": {"job_id": 5}}
    data = _wrapped(msgspec.msgpack.encode(image))
    with pytest.raises(SnapshotError, match=r"\$\.jobs\[\.\.\.\]"):
        decode_snapshot(data, VERSION)


def test_a_snapshot_with_unknown_fields_or_another_format_is_refused() -> None:
    image = msgspec.msgpack.decode(_image_bytes(State()))
    with pytest.raises(SnapshotError, match="unknown field"):
        decode_snapshot(_wrapped(msgspec.msgpack.encode({**image, "extra": 1})), VERSION)
    forged = Snapshot(format=FORMAT + 1, seq=0, code_version=VERSION, state=msgspec.Raw(b"\xc0"))
    with pytest.raises(SnapshotError, match=f"format {FORMAT + 1}"):
        decode_snapshot(msgspec.msgpack.encode(forged), VERSION)


def test_a_snapshot_whose_state_is_at_another_sequence_is_refused() -> None:
    data = _wrapped(_image_bytes(State()), seq=7)
    with pytest.raises(SnapshotError, match="at sequence 0, not 7"):
        decode_snapshot(data, VERSION)


def test_a_huge_claim_in_a_small_snapshot_is_refused_without_allocating_it() -> None:
    """A MessagePack array header claiming four billion items, and nothing after it."""
    image = msgspec.msgpack.decode(_image_bytes(State()))
    body = bytearray(msgspec.msgpack.encode({**image, "waiting_runtimes": []}))
    at = body.index(b"waiting_runtimes") + len(b"waiting_runtimes")
    assert body[at] == 0x90  # an empty array
    body[at : at + 1] = b"\xdd\xff\xff\xff\xff"  # array32 of 2**32 - 1 items
    with pytest.raises(SnapshotError, match="truncated"):
        decode_snapshot(_wrapped(bytes(body)), VERSION)


def test_bytes_that_are_no_snapshot_at_all_are_refused() -> None:
    for data in (b"", b"\x00" * 100, b"{}", msgspec.msgpack.encode([1, 2, 3])):
        with pytest.raises(SnapshotError, match="not a snapshot"):
            decode_snapshot(data, VERSION)


def test_a_state_waiting_for_a_refold_has_no_snapshot() -> None:
    state = State()
    state.refold_due = True
    with pytest.raises(SnapshotError, match="waits for a refold"):
        encode_snapshot(state, VERSION)


def _image_bytes(state: State) -> bytes:
    return bytes(read_header(encode_snapshot(state, VERSION)).state)


def _wrapped(image: bytes, seq: int = 0) -> bytes:
    snapshot = Snapshot(format=FORMAT, seq=seq, code_version=VERSION, state=msgspec.Raw(image))
    return msgspec.msgpack.encode(snapshot)


def verified_with(records: list[Record], *snapshots: tuple[str, bytes]) -> Verification:
    plans = [r for r in records if r.subject.startswith(PLAN_EVENTS[:-1])]
    return verify(plans, records, VERSION, snapshots=list(snapshots))


def test_replay_checks_a_snapshot_that_is_the_fold_of_its_prefix(tmp_path: Path) -> None:
    records = history(tmp_path, 1000)
    at_400 = encode_snapshot(fold_all(records[:400]), VERSION)
    at_end = encode_snapshot(fold_all(records), VERSION)
    result = verified_with(records, ("s400", at_400), ("end", at_end))
    assert result.divergences == []
    assert result.snapshots == 2


def test_replay_names_a_snapshot_that_is_not_the_fold_of_its_prefix(tmp_path: Path) -> None:
    records = history(tmp_path, 1000)
    forged = fold_all(records[:400])
    job = next(iter(forged.jobs.values()))
    job.status = JobStatus.CANCELLED  # what no event said
    result = verified_with(records, ("ALLOT_SNAPSHOTS/state", encode_snapshot(forged, VERSION)))
    [divergence] = result.divergences
    assert divergence.seq == 400
    assert divergence.diff == [
        "snapshot ALLOT_SNAPSHOTS/state at sequence 400 is not the fold of the log up to it "
        "(it differs in: jobs)"
    ]
    assert result.events == 400  # it stops there, as at a diverging plan


def test_replay_reports_snapshots_it_cannot_check(tmp_path: Path) -> None:
    records = history(tmp_path, 300)
    past_the_end = State()
    past_the_end.seq = 5000
    other_code = encode_snapshot(fold_all(records[:100]), "0.0.1+other")
    result = verified_with(
        records,
        ("late", encode_snapshot(past_the_end, VERSION)),
        ("old", other_code),
        ("junk", b"\x00junk"),
    )
    assert [d.diff[0] for d in result.divergences] == [
        "snapshot junk: not a snapshot: Expected `object`, got `int`",
        "snapshot late at sequence 5000: the log ends before it",
    ]
    assert (
        "snapshot old at sequence 100 was written by code version 0.0.1+other; this is "
        f"{VERSION}: no service starts from it"
    ) in result.warnings
    assert result.snapshots == 0


def test_a_refold_from_the_state_an_archive_left_is_the_refold_of_the_whole_log(
    tmp_path: Path,
) -> None:
    """A quarantine after the archived start: the services and replay fold the rest again
    from the base, and get what folding everything again would."""
    records = history(tmp_path, 600)
    target = next(r for r in records[400:] if r.type == "JobSubmitted")
    quarantine = EventQuarantined(
        meta=Meta(id="q", at=1, producer="operator"), seq=target.seq, reason="bad", by="admin"
    )
    records.append(make_record(len(records) + 1, subject_for(quarantine), encode(quarantine), {}))
    whole = fold_all(records)
    assert whole.refolds == 1
    assert target.seq in whole.quarantined

    def base() -> State:
        return decode_snapshot(encode_snapshot(fold_all(records[:300]), VERSION), VERSION)

    state = base()
    for record in records[300:]:
        apply_record(state, record)
        if state.refold_due:
            state = refold(state, records[300:], base())
    assert encode_state(state) == encode_state(whole)


def charged_past_64_bits() -> State:
    """A running job charged three times the most one charge may say: each charge is well
    formed, but the sums of usage no longer fit the 64 bits MessagePack holds."""
    state = fold(b.node("n1", 8), b.submitted("j1", gpus=2), b.plan(("j1", "n1", [0, 1])))
    apply(state, state.seq + 1, b.started("j1", "n1", [0, 1]))
    minute = 60 * S
    for i in range(3):
        charge = UsageCharged(
            meta=b.meta(), path="lab/team", job_id="j1", attempt=0,
            from_ns=b.meta().at + i * minute, to_ns=b.meta().at + (i + 1) * minute,
            gpu_ms=MAX_QUANTITY,
        )  # fmt: skip
        apply(state, state.seq + 1, charge)
    assert state.usage["lab"].total_gpu_ms > 2**64
    return state


def test_a_state_holding_a_number_past_64_bits_has_no_snapshot_and_says_why() -> None:
    state = charged_past_64_bits()
    with pytest.raises(SnapshotError, match=f"the state at sequence {state.seq} holds a number"):
        encode_snapshot(state, VERSION)


def _ghost_waits(state: State) -> None:
    state.pending["ghost"] = None
    state.queues[("batch", "lab/team")] = [(1, 0, "ghost")]


def _queue_of_no_job(state: State) -> None:
    state.queues[("tier", "nobody")] = [(1, 0, "j1")]


def _holds_for_nobody(state: State) -> None:
    state.holders["ghost"] = {"gpus": 2}


def _gpu_held_by_nobody(state: State) -> None:
    state.nodes["n1"].allocated[7] = "ghost"


def _plan_ahead(state: State) -> None:
    state.last_plan_seq = state.seq + 1


@pytest.mark.parametrize(
    ("forge", "why"),
    [
        (_ghost_waits, "pending: not the jobs whose status is pending"),
        (_queue_of_no_job, "queues: not those of the pending jobs"),
        (_holds_for_nobody, "holders: not the jobs that hold GPUs"),
        (_gpu_held_by_nobody, r"nodes\[n1\]\.allocated: GPU 7 held by ghost"),
        (_plan_ahead, "last_plan_seq=4: not within 0 to its sequence 3"),
    ],
)
def test_a_snapshot_of_a_state_no_fold_makes_is_refused_saying_where(
    forge: Callable[[State], None], why: str
) -> None:
    """Such a state decodes under the types, then fails every planning cycle (a KeyError)
    or misleads it: refused, the service folds the log instead."""
    state = fold(b.node("n1", 8), b.submitted("j1", gpus=2), b.submitted("j2", gpus=1))
    forge(state)
    with pytest.raises(SnapshotError, match=f"its state is not one a fold makes: {why}"):
        decode_snapshot(encode_snapshot(state, VERSION), VERSION)
