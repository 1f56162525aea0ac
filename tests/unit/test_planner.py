import msgspec
from hypothesis import given
from hypothesis import strategies as st

from allot.core import DEFAULT_POLICY, Policy, apply, plan, policy_hash
from allot.proto.events import Event, PendingReason, UsageCharged
from tests import builders as b
from tests.builders import fold


def test_best_fit_takes_the_fullest_node_with_room_and_its_lowest_gpus() -> None:
    state = fold(
        b.node("n2", 8),
        b.node("n1", 4),
        b.submitted("a", 3),
        b.submitted("b", 2),
        b.submitted("c", 8),
    )
    decided = plan(state, now=5, policy=DEFAULT_POLICY)
    assert decided.admissions == [
        b.admission("a", ("n1", [0, 1, 2])),
        b.admission("b", ("n2", [0, 1])),
    ]
    # c would have fit on n2 had b not come first.
    assert decided.pending == [PendingReason(job_id="c", code="BEHIND", params={"need": 8})]


def test_a_job_that_does_not_fit_does_not_block_smaller_ones_behind_it() -> None:
    state = fold(b.node("n1", 4), b.submitted("big", 8), b.submitted("small", 1))
    decided = plan(state, now=5, policy=DEFAULT_POLICY)
    assert [a.job_id for a in decided.admissions] == ["small"]


def test_without_nodes_every_job_waits_for_nodes() -> None:
    decided = plan(fold(b.submitted("a")), now=5, policy=DEFAULT_POLICY)
    assert decided.pending == [PendingReason(job_id="a", code="NO_NODES")]


def test_lost_nodes_get_nothing() -> None:
    state = fold(b.node("n1"), b.lost("n1"), b.submitted("a"))
    assert plan(state, now=5, policy=DEFAULT_POLICY).admissions == []


def test_a_plan_states_only_reasons_that_changed() -> None:
    state = fold(b.node("n1", 1), b.submitted("a", 2), b.submitted("b", 1))
    decided = plan(state, now=5, policy=DEFAULT_POLICY)
    assert [a.job_id for a in decided.admissions] == ["b"]
    assert decided.pending == [PendingReason(job_id="a", code="NO_FIT", params={"need": 2})]
    apply(state, 4, msgspec.structs.replace(b.plan(("b", "n1", [0])), pending=decided.pending))

    assert plan(state, now=6, policy=DEFAULT_POLICY).empty
    apply(state, 5, b.lost("n1"))
    again = plan(state, now=7, policy=DEFAULT_POLICY)
    assert again.pending == [PendingReason(job_id="a", code="NO_NODES")]


def test_the_policy_hash_follows_the_content() -> None:
    assert policy_hash(Policy()) == policy_hash(Policy(name=DEFAULT_POLICY.name))
    assert policy_hash(Policy()) != policy_hash(Policy(name="other"))


@given(
    nodes=st.lists(st.integers(1, 8), min_size=1, max_size=4),
    jobs=st.lists(st.integers(1, 8), max_size=12),
    order=st.randoms(use_true_random=False),
)
def test_no_gpu_is_assigned_twice_and_the_plan_ignores_node_names(
    nodes: list[int], jobs: list[int], order
) -> None:  # type: ignore[no-untyped-def]
    node_events = [b.node(f"n{i}", g) for i, g in enumerate(nodes)]
    job_events = [b.submitted(f"j{i}", g) for i, g in enumerate(jobs)]
    state = fold(*node_events, *job_events)
    decided = plan(state, now=1, policy=DEFAULT_POLICY, whole_queue=True)

    taken = [(p.node_id, g) for a in decided.admissions for p in a.placements for g in p.gpus]
    assert len(taken) == len(set(taken))
    for a in decided.admissions:
        assert sum(len(p.gpus) for p in a.placements) == state.jobs[a.job_id].spec.gpus
    assert {a.job_id for a in decided.admissions} | {p.job_id for p in decided.pending} == set(
        state.pending
    )

    # The same nodes under other names, registered in the same order: the same decisions,
    # by the new names.
    names = [f"n{i}" for i in range(len(nodes))]
    order.shuffle(names)
    renamed = dict(zip([f"n{i}" for i in range(len(nodes))], names, strict=True))
    node_events = [b.node(renamed[f"n{i}"], g) for i, g in enumerate(nodes)]
    again = plan(fold(*node_events, *job_events), now=1, policy=DEFAULT_POLICY, whole_queue=True)
    assert again.pending == decided.pending
    assert [(a.job_id, [(p.node_id, p.gpus) for p in a.placements]) for a in again.admissions] == [
        (a.job_id, [(renamed[p.node_id], p.gpus) for p in a.placements]) for a in decided.admissions
    ]


ENDED = 3600 * 10**9 + 2000  # an hour after the charges below


def charge(account: str, job_id: str, gpu_ms: int) -> list[Event]:
    """A job of ``account`` that ran on n1 and was charged ``gpu_ms`` in hour 0."""
    spec = msgspec.structs.replace(b.spec(), account=account)
    return [
        msgspec.structs.replace(b.submitted(job_id), spec=spec),
        b.plan((job_id, "n1", [0])),
        b.started(job_id, "n1", [0]),  # at 1000
        UsageCharged(
            meta=b.meta(),
            path=account,
            job_id=job_id,
            attempt=0,
            from_ns=1000,
            to_ns=2000,
            gpu_ms=gpu_ms,
        ),
        b.exited(job_id, "n1"),
    ]


def test_the_account_furthest_below_its_share_goes_first() -> None:
    history = [*charge("heavy", "h0", 10_000), *charge("light", "l0", 10)]
    heavy_job = msgspec.structs.replace(
        b.submitted("h1"), spec=msgspec.structs.replace(b.spec(), account="heavy")
    )
    light_job = msgspec.structs.replace(
        b.submitted("l1"), spec=msgspec.structs.replace(b.spec(), account="light")
    )
    state = fold(b.node("n1", 1), *history, heavy_job, light_job)
    assert state.usage["heavy"].total_gpu_ms == 10_000
    decided = plan(state, now=ENDED, policy=DEFAULT_POLICY)
    assert [a.job_id for a in decided.admissions] == ["l1"]  # submitted later, ranked first
    assert [(r.account, r.rank) for r in decided.ranks] == [("heavy", 2), ("light", 1)]
    rank = decided.ranks[0]
    assert (rank.share_ppm, rank.usage_gpu_ms) == (500_000, 10_000)


def test_waiting_lifts_a_job_by_a_bounded_number_of_ranks() -> None:
    accounts = [f"t{i}" for i in range(5)]
    history = [e for i, a in enumerate(accounts) for e in charge(a, f"old{i}", 10 ** (i + 1))]

    def job(account: str, at: int) -> Event:
        event = b.submitted(f"new-{account}")
        spec = msgspec.structs.replace(b.spec(), account=account)
        return msgspec.structs.replace(
            event, spec=spec, meta=msgspec.structs.replace(event.meta, at=at)
        )

    # t4 used the most (rank 5), but its job has waited far longer than 3 aging steps:
    # it is lifted 3 ranks, no more, to rank 2, behind t1's earlier submission.
    jobs = [job(a, at=ENDED) for a in accounts[:4]] + [job("t4", at=ENDED - 100_000)]
    state = fold(b.node("n1", 1), *history, b.lost("n1"), *jobs)
    policy = Policy(aging_step_ns=100, aging_max_ranks=3)
    order = [r.job_id for r in plan(state, ENDED, policy).pending]
    assert order == ["new-t0", "new-t1", "new-t4", "new-t2", "new-t3"]


def test_a_day_of_waiting_does_not_outweigh_fair_share() -> None:
    # Six accounts, t0 the least served. A day-old job is lifted at most four ranks: t1's
    # passes t0's new job, t5's does not (with a bound as large as the number of accounts,
    # every day-old job would).
    accounts = [f"t{i}" for i in range(6)]
    history = [e for i, a in enumerate(accounts) for e in charge(a, f"old{i}", 10 ** (i + 1))]
    day = 24 * 3600 * 10**9
    now = ENDED + day

    def job(job_id: str, account: str, at: int) -> Event:
        event = b.submitted(job_id)
        spec = msgspec.structs.replace(b.spec(), account=account)
        return msgspec.structs.replace(
            event, spec=spec, meta=msgspec.structs.replace(event.meta, at=at)
        )

    waiting = [job("t5-old", "t5", ENDED), job("t1-old", "t1", ENDED), job("t0-new", "t0", now)]
    state = fold(b.node("n1", 1), *history, b.lost("n1"), *waiting)
    order = [r.job_id for r in plan(state, now, DEFAULT_POLICY).pending]
    assert order == ["t1-old", "t0-new", "t5-old"]
    patient = msgspec.structs.replace(DEFAULT_POLICY, aging_max_ranks=len(accounts))
    assert [r.job_id for r in plan(state, now, patient).pending][-1] == "t0-new"


def test_once_a_tree_is_declared_accounts_outside_it_rank_last() -> None:
    from allot.proto.events import AccountDefined, AccountSettings

    def job(job_id: str, account: str) -> Event:
        return msgspec.structs.replace(
            b.submitted(job_id), spec=msgspec.structs.replace(b.spec(), account=account)
        )

    state = fold(
        b.node("n1", 1),
        b.lost("n1"),
        job("old", "demo"),  # submitted before the tree existed
        AccountDefined(meta=b.meta(), path="lab", settings=AccountSettings()),
        AccountDefined(meta=b.meta(), path="lab/a", settings=AccountSettings()),
        job("new", "lab/a"),
    )
    decided = plan(state, now=2000, policy=DEFAULT_POLICY)
    assert [r.job_id for r in decided.pending] == ["new", "old"]
    assert [r.account for r in decided.ranks] == ["lab/a"]


def test_tiers_go_first_then_fair_share() -> None:
    def job(job_id: str, account: str, tier: str) -> Event:
        spec = msgspec.structs.replace(b.spec(), account=account, tier=tier)
        return msgspec.structs.replace(b.submitted(job_id), spec=spec)

    history = [*charge("heavy", "h0", 10_000), *charge("light", "l0", 10)]
    state = fold(
        b.node("n1", 1),
        *history,
        b.lost("n1"),
        job("light-batch", "light", "batch"),
        job("heavy-interactive", "heavy", "interactive"),
        job("light-best-effort", "light", "best-effort"),
        job("heavy-batch", "heavy", "batch"),
    )
    order = [r.job_id for r in plan(state, ENDED, DEFAULT_POLICY).pending]
    assert order == ["heavy-interactive", "light-batch", "heavy-batch", "light-best-effort"]


def test_a_plan_tells_at_most_a_thousand_jobs_queued_and_the_next_the_rest() -> None:
    # After a burst of 25,000 submissions one plan telling each job QUEUED was 1.5 MB: over
    # the log's largest event, so no plan could be stored at all.
    from allot.core.planning import MAX_QUEUED
    from allot.proto.codes import QUEUED

    state = b.fold(b.node("n1", 1), *[b.submitted(f"j{n:04}", 1) for n in range(2500)])
    told: list[list[str]] = []
    for _ in range(5):
        decided = plan(state, 10**12, DEFAULT_POLICY)
        told.append([r.job_id for r in decided.pending if r.code == QUEUED])
        recorded = msgspec.structs.replace(
            b.plan(), pending=decided.pending, admissions=decided.admissions
        )
        apply(state, state.seq + 1, recorded)
    assert MAX_QUEUED == 1000
    assert [len(t) for t in told[:2]] == [1000, 1000]
    assert 0 < len(told[2]) <= 500
    flat = [j for t in told for j in t]
    assert flat == sorted(set(flat))  # each told once, the longest waiting first
    assert not state.unstated  # all told by the third plan


def test_a_plan_states_the_ranks_of_the_accounts_it_names_not_of_every_account() -> None:
    """With thousands of accounts waiting, ranking each of them would make a plan larger
    than the log's largest event, and no plan could be stored at all."""
    from allot.proto.limits import EVENT_HEADROOM_BYTES, MAX_EVENT_BYTES

    accounts = 12_000
    waiting = [b.submitted(f"j{i}", 16, account=f"lab/t{i:05d}") for i in range(accounts)]
    state = fold(b.node("n1", 8), *waiting)
    decided = plan(state, now=2000, policy=DEFAULT_POLICY)
    named = {state.jobs[r.job_id].spec.account for r in [*decided.admissions, *decided.pending]}
    assert len(named) < accounts / 5
    assert [r.account for r in decided.ranks] == sorted(named)
    recorded = decided.recorded(
        b.meta(),
        basis_seq=state.seq,
        now=2000,
        policy="allot",
        policy_hash=policy_hash(DEFAULT_POLICY),
        code_version="test",
    )
    assert len(msgspec.json.encode(recorded)) < MAX_EVENT_BYTES - EVENT_HEADROOM_BYTES
