"""What each account is owed, accrued as the log is folded (``allot.core.entitlement``), and
fair share on the ``owed`` basis that holds usage against it."""

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from allot.core import State, apply
from allot.core.entitlement import MICRO, owed_rates, water_fill
from allot.core.fairshare import FairSharePolicy, standings
from allot.core.model import HOUR_NS, AccountUsage
from allot.core.snapshot import decode_snapshot, encode_snapshot
from allot.core.wellformed import MAX_QUANTITY
from allot.proto.events import (
    AccountDefined,
    AccountSettings,
    AccountUpdated,
    Event,
    JobCancelRequested,
    JobRequeued,
    StopRequested,
)
from tests import builders as b

GPU_HOUR_MS = 3_600_000  # GPU-ms in a GPU-hour


def at(event: Event, when: int) -> Event:
    return msgspec.structs.replace(event, meta=b.meta(when))  # type: ignore[type-var]


def fold(*events: Event) -> State:
    state = State()
    for seq, event in enumerate(events, start=1):
        apply(state, seq, event)
    return state


def owed_gpu_hours(state: State, path: str) -> float:
    return state.owed[path].total_gpu_ms / GPU_HOUR_MS if path in state.owed else 0.0


def end(job_id: str, when: int) -> Event:
    return JobCancelRequested(meta=b.meta(when), job_id=job_id)


def test_water_fill_gives_the_capped_what_they_want_and_the_rest_by_weight() -> None:
    equal = {"a": 1, "b": 1, "c": 1}
    assert water_fill(10, {"a": 2, "b": 8, "c": 8}, equal) == {"a": 2, "b": 4, "c": 4}
    assert water_fill(8, {"a": 8, "b": 8}, {"a": 1, "b": 3}) == {"a": 2, "b": 6}
    # Enough for everyone: each gets what it wants, and no more.
    assert water_fill(100, {"a": 3, "b": 5}, {"a": 1, "b": 1}) == {"a": 3, "b": 5}
    # Wanting nothing, or having no weight, is owed nothing.
    assert water_fill(10, {"a": 0, "b": 4, "z": 4}, {"a": 1, "b": 1}) == {"a": 0, "b": 4, "z": 0}


@given(
    st.integers(0, 10**9),
    st.dictionaries(st.sampled_from("abcdef"), st.integers(0, 10**8), min_size=1),
    st.dictionaries(st.sampled_from("abcdef"), st.integers(1, 9)),
)
def test_water_fill_is_max_min_fair(
    capacity: int, wants: dict[str, int], weights: dict[str, int]
) -> None:
    given_ = water_fill(capacity, wants, weights)
    assert sum(given_.values()) <= capacity
    assert all(0 <= given_[a] <= wants[a] for a in wants)
    short = [a for a in wants if a in weights and given_[a] < wants[a]]
    if not short:
        return
    # Someone is short of what it wants: nothing was left over (but rounding), and no
    # account got more per weight than one that is short.
    assert capacity - sum(given_.values()) < len(wants)
    for a in short:
        for other in wants:
            if other in weights:
                assert given_[other] * weights[a] <= (given_[a] + 1) * weights[other]


def test_owed_accrues_by_share_while_accounts_want_and_follows_their_demand() -> None:
    # 8 GPUs; two accounts want 8 each for 2 h: 4 GPUs each owed. Then one's job ends and
    # the other is owed all 8 for an hour.
    state = fold(
        at(b.node("n1", 8), 0),
        at(b.submitted("a1", 8, account="lab/a"), 0),
        at(b.submitted("b1", 8, account="lab/b"), 0),
        end("a1", 2 * HOUR_NS),
        at(b.submitted("b2", 1, account="lab/b"), 3 * HOUR_NS),
    )
    assert owed_gpu_hours(state, "lab/a") == 8.0
    assert owed_gpu_hours(state, "lab/b") == 8.0 + 8.0
    assert owed_gpu_hours(state, "lab") == 24.0  # the parent: what its children were owed
    # Kept per hour, as usage is.
    assert state.owed["lab/b"].by_hour == {0: 4 * GPU_HOUR_MS, 1: 4 * GPU_HOUR_MS,
                                           2: 8 * GPU_HOUR_MS}  # fmt: skip
    assert state.wanted == {"lab/b": 9}


def test_nothing_is_owed_without_gpus_and_a_lost_node_stops_its_part() -> None:
    state = fold(
        at(b.submitted("a1", 8, account="lab/a"), 0),
        at(b.node("n1", 8), HOUR_NS),  # nothing owed for the hour before
        at(b.node("n2", 8), 2 * HOUR_NS),
        at(b.lost("n2"), 3 * HOUR_NS),  # one hour of 8 GPUs: all it wanted
        at(b.submitted("a2", 8, account="lab/a"), 4 * HOUR_NS),
    )
    # 1 h of 8 GPUs (one node), 1 h of 8 (it wanted 8 of 16), 1 h of 8 (one node left).
    assert owed_gpu_hours(state, "lab/a") == 24.0


def test_time_running_back_adds_nothing_and_a_bad_event_changes_nothing() -> None:
    state = fold(
        at(b.node("n1", 8), 0),
        at(b.submitted("a1", 8, account="lab/a"), 2 * HOUR_NS),
        at(b.submitted("a2", 8, account="lab/a"), HOUR_NS),  # stamped before the last
        at(b.submitted("a1", 8, account="lab/a"), 5 * HOUR_NS),  # a duplicate: ignored
    )
    assert owed_gpu_hours(state, "lab/a") == 0.0
    assert state.owed_until == 2 * HOUR_NS
    assert state.wanted == {"lab/a": 16}


def test_a_snapshot_keeps_what_was_owed_and_the_tail_folds_on_from_it() -> None:
    events = [
        at(b.node("n1", 8), 0),
        at(b.submitted("a1", 8, account="lab/a"), 0),
        at(b.submitted("b1", 2, account="lab/b"), HOUR_NS),
        end("b1", 3 * HOUR_NS),
        at(b.submitted("a2", 8, account="lab/a"), 5 * HOUR_NS),
    ]
    whole = fold(*events)
    head = fold(*events[:3])
    restored = decode_snapshot(encode_snapshot(head, "v"), "v")
    for seq, event in enumerate(events[3:], start=4):
        apply(restored, seq, event)
    assert restored.owed == whole.owed
    assert restored.wanted == whole.wanted
    assert owed_gpu_hours(whole, "lab/a") == 8.0 + 2 * 6.0 + 2 * 8.0


def test_owed_basis_holds_usage_against_what_was_owed_not_the_bare_share() -> None:
    """``a`` ran alone for 10 h (no one else wanted GPUs), then ``b`` ran 2 h while ``a``
    waited: ``a`` used 80 GPU-h of the 88 it was owed, ``b`` 16 of 8. By share, ``a`` used
    five times ``b``'s usage and ranks last; by what each was owed, ``b`` is the one ahead."""
    events: list[Event] = [
        at(b.node("n1", 8), 0),
        at(b.submitted("a1", 8, account="lab/a"), 0),
        at(b.submitted("b1", 8, account="lab/b"), 10 * HOUR_NS),
        at(b.submitted("a2", 1, account="lab/a"), 12 * HOUR_NS),
    ]
    state = fold(*events)
    usage = {"lab/a": [(h, 8 * GPU_HOUR_MS) for h in range(10)],
             "lab/b": [(h, 8 * GPU_HOUR_MS) for h in (10, 11)]}  # fmt: skip
    for path, charges in usage.items():
        for parent in (path, "lab"):
            booked = state.usage.setdefault(parent, AccountUsage())
            for hour, gpu_ms in charges:
                booked.total_gpu_ms += gpu_ms
                booked.add(hour, gpu_ms)
    now = 12 * HOUR_NS
    by_share = standings(state, now, FairSharePolicy())
    by_owed = standings(state, now, FairSharePolicy(basis="owed"))
    assert by_share["lab/b"].rank < by_share["lab/a"].rank
    assert by_owed["lab/a"].rank < by_owed["lab/b"].rank
    assert by_owed["lab/b"].over_share
    assert not by_owed["lab/a"].over_share


def test_rates_are_micro_gpus_computed_again_only_when_what_they_come_from_changes() -> None:
    state = fold(at(b.node("n1", 4), 0), at(b.submitted("a1", 8, account="x"), 0))
    assert owed_rates(state) == {"x": 4 * MICRO}  # all 4 GPUs: it wants 8
    first = owed_rates(state)
    assert owed_rates(state) is first
    apply(state, 3, at(b.node("n2", 2), HOUR_NS))
    assert owed_rates(state) == {"x": 6 * MICRO}


def test_a_clock_far_ahead_adds_at_most_a_day_and_stops_nothing() -> None:
    # A node agent whose clock is years ahead (or a forged stamp) registers again: at most
    # a day is owed for it, and the honest events after it accrue as they would.
    state = fold(
        at(b.node("n1", 8), 0),
        at(b.submitted("a1", 8, account="lab/a"), 0),
        at(b.node("n1", 8), MAX_QUANTITY),
        at(b.submitted("b1", 8, account="lab/b"), 2 * HOUR_NS),
        at(b.submitted("b2", 1, account="lab/b"), 12 * HOUR_NS),
    )
    assert owed_gpu_hours(state, "lab/a") <= 8 * 2 + 8 * 24 + 4 * 10
    assert owed_gpu_hours(state, "lab/b") == 4 * 10  # half of 8 GPUs from 2 h to 12 h
    assert state.owed_until == 12 * HOUR_NS


def test_a_stopped_job_wants_nothing_once_it_has_ended() -> None:
    # Stopped for another, then (resumable or not) ended: its GPUs are no longer wanted.
    for resumable in (False, True):
        events = [
            at(b.node("n1", 8), 0),
            at(b.submitted("j", 8, account="lab/a", resumable=resumable), 0),
            at(b.plan(("j", "n1", list(range(8)))), 1),
            at(b.started("j", "n1", list(range(8))), 2),
            StopRequested(meta=b.meta(HOUR_NS), job_id="j", attempt=0, kind="preempt",
                          reason="for k", grace_ns=10**9),
            msgspec.structs.replace(b.exited("j", "n1", None), stopped_in_ns=1,
                                    meta=b.meta(HOUR_NS + 5)),
            at(b.preempted("j"), HOUR_NS + 6),
        ]  # fmt: skip
        if resumable:  # requeued, then cancelled while it waits
            events.append(JobRequeued(meta=b.meta(HOUR_NS + 7), job_id="j", reason="preempted"))
            events.append(end("j", HOUR_NS + 8))
        events.append(at(b.submitted("k", 1, account="lab/b"), 5 * HOUR_NS))
        state = fold(*events)
        assert state.jobs["j"].status.terminal
        assert state.wanted == {"lab/b": 1}
        assert owed_gpu_hours(state, "lab/a") == pytest.approx(8.0, abs=0.01)


def test_weights_changed_count_from_the_change_on() -> None:
    state = fold(
        at(b.node("n1", 8), 0),
        AccountDefined(meta=b.meta(0), path="a", settings=AccountSettings()),
        AccountDefined(meta=b.meta(0), path="b", settings=AccountSettings()),
        at(b.submitted("a1", 8, account="a"), 0),
        at(b.submitted("b1", 8, account="b"), 0),
        AccountUpdated(meta=b.meta(10 * HOUR_NS), path="a", settings=AccountSettings(weight=3)),
        at(b.submitted("b2", 1, account="b"), 12 * HOUR_NS),
    )
    assert owed_gpu_hours(state, "a") == 4 * 10 + 6 * 2
    assert owed_gpu_hours(state, "b") == 4 * 10 + 2 * 2


def test_the_memo_ranks_again_when_only_what_was_owed_grew() -> None:
    """Within one hour and with nothing charged, a submission accrues what was owed: on the
    owed basis that moves the standings, and the memo must not serve the old ones."""
    from allot.core.fairshare import StandingsMemo

    state = fold(
        at(b.node("n1", 8), 0),
        at(b.submitted("a1", 8, account="lab/a"), 0),
        at(b.submitted("b1", 8, account="lab/b"), 10 * 60 * 10**9),
    )
    for path, gpu_ms in [("lab/a", GPU_HOUR_MS), ("lab/b", GPU_HOUR_MS // 2)]:
        for parent in (path, "lab"):
            booked = state.usage.setdefault(parent, AccountUsage())
            booked.total_gpu_ms += gpu_ms
            booked.add(0, gpu_ms)
    policy, now = FairSharePolicy(basis="owed"), 50 * 60 * 10**9
    memo = StandingsMemo(state)
    before = memo.standings(now, policy)
    apply(state, 4, at(b.submitted("b2", 1, account="lab/b"), 40 * 60 * 10**9))
    after = memo.standings(now, policy)
    assert after == standings(state, now, policy)
    assert after != before
