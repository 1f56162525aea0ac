"""Ten thousand hostile messages, with the planner's own plans among them: the decoder
raises nothing but a decode error, the fold never fails a rule, plans can always be made,
and replay reads it all."""

import pytest

from allot.bus.codec import encode
from allot.bus.eventlog import Record, make_record
from allot.core import DEFAULT_POLICY, PlanMemo, State, apply_record, plan, policy_hash
from allot.core.fold import RULE_FAILED
from allot.core.replay import state_at, verify
from tests import builders as b
from tests.fuzz import Fuzzer


def planned(state: State, now: int, memo: PlanMemo) -> bytes:
    """What the planner service appends for ``state``."""
    event = plan(state, now, DEFAULT_POLICY, memo).recorded(
        b.meta(at=now),
        basis_seq=state.seq,
        now=now,
        policy=DEFAULT_POLICY.name,
        policy_hash=policy_hash(DEFAULT_POLICY),
        code_version="test",
    )
    return encode(event)


@pytest.mark.parametrize("seed", [1, 2])
def test_no_message_stops_the_fold_or_the_planner(seed: int) -> None:
    records: list[Record] = []
    state = State()
    memo = PlanMemo(state)
    refolds, failed = 0, []

    def fold(subject: str, data: bytes) -> None:
        record = make_record(len(records) + 1, subject, data, {})
        records.append(record)
        ignored = state.ignored_count
        apply_record(state, record, records)
        if state.ignored_count > ignored and state.ignored[-1].reason.startswith(RULE_FAILED):
            failed.append(state.ignored[-1])

    for number, (subject, data) in enumerate(Fuzzer(seed).messages(10_000), start=1):
        fold(subject, data)
        if state.refolds != refolds:
            memo, refolds = PlanMemo(state), state.refolds
        if number % 20 == 0:
            fold("allot.evt.plan.PlanComputed", planned(state, number * 10**9, memo))
    assert failed == []
    assert state.ignored_count > 5_000  # most of it is refused, for a reason
    assert len(state.jobs) > 0  # and what is well-formed is folded

    replayed, _ = state_at(records)
    assert replayed.seq == state.seq
    assert sorted(replayed.jobs) == sorted(state.jobs)
    assert replayed.ignored_count == state.ignored_count
    verify(records, records, "test")  # forged plans diverge: reading them must not fail
