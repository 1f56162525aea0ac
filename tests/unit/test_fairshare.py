import random
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from allot.core import DEFAULT_POLICY, State, apply
from allot.core.fairshare import DAY_NS, FairSharePolicy, decayed, standings
from allot.core.model import HOUR_NS, AccountUsage
from allot.core.planning import queue
from allot.proto.events import AccountSettings
from tests import builders as b

WEEK = 7 * DAY_NS
POLICY = FairSharePolicy()


def cluster(weights: dict[str, int], used: dict[str, list[tuple[int, int]]]) -> State:
    """Accounts with weights, and charges (hour index, GPU-ms) booked to each and its
    ancestors, as the fold would."""
    state = State()
    for path in sorted(weights, key=lambda p: p.count("/")):
        state.accounts[path] = AccountSettings(weight=weights[path])
    for path, charges in used.items():
        parts = path.split("/")
        for depth in range(len(parts), 0, -1):
            usage = state.usage.setdefault("/".join(parts[:depth]), AccountUsage())
            for hour, gpu_ms in charges:
                usage.total_gpu_ms += gpu_ms
                usage.by_hour[hour] = usage.by_hour.get(hour, 0) + gpu_ms
    return state


def submit(state: State, *jobs: tuple[str, str]) -> State:
    """``state`` with jobs (id, account) submitted, folded in this order."""
    for job_id, account in jobs:
        apply(state, state.seq + 1, b.submitted(job_id, account=account))
    return state


def queued(state: State) -> list[str]:
    return [job.job_id for job in queue(state, HOUR_NS, DEFAULT_POLICY)]


def test_decay_halves_per_half_life_and_interpolates_inside_one() -> None:
    assert decayed(1000, 0, WEEK) == 1000
    assert decayed(1000, WEEK // 2, WEEK) == 750
    assert decayed(1000, WEEK, WEEK) == 500
    assert decayed(1000, 2 * WEEK, WEEK) == 250
    assert decayed(1000, 64 * WEEK, WEEK) == 0


@given(st.integers(0, 10**12), st.integers(0, 20 * WEEK), st.integers(0, 20 * WEEK))
def test_decay_never_grows_with_age(gpu_ms: int, age: int, more: int) -> None:
    assert 0 <= decayed(gpu_ms, age + more, WEEK) <= decayed(gpu_ms, age, WEEK) <= gpu_ms


def test_level_factor_is_share_over_usage_among_siblings() -> None:
    # Hand computed: shares 2/3 and 1/3, equal usage (1/2 each): factors 4/3 and 2/3.
    state = cluster({"a": 2, "b": 1}, {"a": [(0, 1000)], "b": [(0, 1000)]})
    ranks = standings(state, now=HOUR_NS, policy=POLICY)
    assert ranks["a"].level_factor == Fraction(4, 3)
    assert ranks["b"].level_factor == Fraction(2, 3)
    assert (ranks["a"].rank, ranks["b"].rank) == (1, 2)
    assert (ranks["a"].share_ppm, ranks["a"].usage_ppm) == (666_666, 500_000)


def test_every_child_of_a_better_sibling_ranks_above_every_child_of_a_worse_one() -> None:
    state = cluster(
        {"x": 1, "x/heavy": 1, "x/light": 1, "y": 1, "y/idle": 1, "y/busy": 1},
        {"x/heavy": [(0, 9000)], "x/light": [(0, 1)], "y/busy": [(0, 100)]},
    )
    ranks = standings(state, now=HOUR_NS, policy=POLICY)
    order = sorted(ranks, key=lambda p: ranks[p].rank)
    assert order == ["y", "y/idle", "y/busy", "x", "x/light", "x/heavy"]


def test_level_factors_too_close_for_floats_are_ordered_exactly() -> None:
    # 1 / 2**60 and 1 / (2**60 + 1) are the same float: were that all, the names would
    # decide and "a" would come first.
    state = cluster({"a": 1, "b": 1}, {"a": [(0, 2**60 + 1)], "b": [(0, 2**60)]})
    ranks = standings(state, now=HOUR_NS, policy=POLICY)
    assert (ranks["b"].rank, ranks["a"].rank) == (1, 2)


def test_a_weight_too_large_for_a_float_still_ranks() -> None:
    state = cluster({"a": 10**400, "b": 1}, {"a": [(0, 10**6)], "b": [(0, 1)]})
    ranks = standings(state, now=HOUR_NS, policy=POLICY)
    assert (ranks["a"].rank, ranks["b"].rank) == (1, 2)


def test_an_idle_account_rises_to_the_top_and_a_heavy_user_sinks() -> None:
    state = cluster({"a": 1, "b": 1, "c": 1}, {"a": [(0, 5000)], "b": [(0, 1000)]})
    ranks = standings(state, now=HOUR_NS, policy=POLICY)
    assert [ranks[p].rank for p in ("c", "b", "a")] == [1, 2, 3]


def test_old_usage_fades_so_a_team_idle_for_a_week_comes_first() -> None:
    week_hours = WEEK // HOUR_NS
    # a used 1000 a week ago; b used 800 just now: a's usage has halved to 500.
    state = cluster({"a": 1, "b": 1}, {"a": [(0, 1000)], "b": [(week_hours, 800)]})
    ranks = standings(state, now=(week_hours + 1) * HOUR_NS, policy=POLICY)
    assert ranks["a"].usage_gpu_ms == 500
    assert ranks["a"].rank == 1


def test_the_sliding_window_forgets_usage_outside_it() -> None:
    state = cluster({"a": 1, "b": 1}, {"a": [(0, 1000)], "b": [(100, 10)]})
    windowed = FairSharePolicy(window_ns=50 * HOUR_NS)
    ranks = standings(state, now=101 * HOUR_NS, policy=windowed)
    assert ranks["a"].usage_gpu_ms == 0
    assert ranks["a"].rank == 1


@settings(max_examples=100)
@given(
    usage=st.lists(st.integers(1, 10**9), min_size=4, max_size=4),
    weights=st.lists(st.integers(1, 5), min_size=4, max_size=4),
    seed=st.integers(0, 10**6),
)
def test_ranks_do_not_depend_on_names_or_insertion_order(
    usage: list[int], weights: list[int], seed: int
) -> None:
    leaves = ["p/a", "p/b", "q/c", "q/d"]
    rng = random.Random(seed)

    def ranks_under(names: dict[str, str], order: list[int]) -> dict[str, int]:
        tree = {names["p"]: 1, names["q"]: 1}
        tree.update({names[leaves[i]]: weights[i] for i in order})
        state = cluster(tree, {names[leaves[i]]: [(0, usage[i])] for i in order})
        ranks = standings(state, now=HOUR_NS, policy=POLICY)
        return {original: ranks[renamed].rank for original, renamed in names.items()}

    plain = {n: n for n in ["p", "q", *leaves]}
    top = ["zz", "aa"]
    rng.shuffle(top)
    renamed = {"p": top[0], "q": top[1]}
    for leaf in leaves:
        parent, name = leaf.split("/")
        renamed[leaf] = f"{renamed[parent]}/{rng.choice(['m', 'x', 'b'])}{name}"
    order = list(range(4))
    rng.shuffle(order)
    assert ranks_under(renamed, order) == ranks_under(plain, list(range(4)))


LEAVES = ["p/a", "p/b", "q/c", "q/d", "q/e"]
usages = st.lists(st.integers(0, 10**9), min_size=len(LEAVES), max_size=len(LEAVES))


@given(usages, st.integers(0, len(LEAVES) - 1), st.integers(1, 10**9))
def test_a_heavier_user_never_ranks_better(usage: list[int], who: int, extra: int) -> None:
    weights = {"p": 1, "q": 2, **dict.fromkeys(LEAVES, 1)}

    def rank(amounts: list[int]) -> int:
        used = {leaf: [(0, u)] for leaf, u in zip(LEAVES, amounts, strict=True) if u}
        return standings(cluster(weights, used), HOUR_NS, POLICY)[LEAVES[who]].rank

    heavier = list(usage)
    heavier[who] += extra
    assert rank(heavier) >= rank(usage)


@given(usages)
def test_an_idle_account_ranks_before_every_busy_sibling(usage: list[int]) -> None:
    weights = {"p": 1, "q": 1, **dict.fromkeys(LEAVES, 1)}
    used = {leaf: [(0, u)] for leaf, u in zip(LEAVES, usage, strict=True) if u}
    ranks = standings(cluster(weights, used), HOUR_NS, POLICY)
    for idle in [leaf for leaf in LEAVES if leaf not in used]:
        parent = idle.split("/")[0]
        for busy in [leaf for leaf in used if leaf.startswith(parent + "/")]:
            assert ranks[idle].rank < ranks[busy].rank


def test_usage_older_than_two_days_is_kept_per_day() -> None:
    usage = AccountUsage()
    for hour in range(101):
        usage.add(hour, 1)
    # Hours before (100 - 48) rounded down to a day (48) merged, each under its day's end.
    assert usage.daily_before == 48
    assert usage.by_day == {23: 24, 47: 24}
    assert sorted(usage.by_hour) == list(range(48, 101))
    usage.add(5, 7)  # a late charge for a merged hour goes to its day
    assert usage.by_day[23] == 31


charges = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "c"]),
        st.sampled_from([0, 0, 1, 3, 50, 100, 500]),  # hours before the current one it is for
        st.sampled_from([0, 1, 999, 10**6]),
        st.sampled_from([0, 0, HOUR_NS // 2, 26 * HOUR_NS]),  # time to the next charge
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(charges, st.sampled_from([POLICY, FairSharePolicy(window_ns=30 * HOUR_NS)]))
def test_the_memo_ranks_as_a_fresh_ranking_does(
    charged: list[tuple[str, int, int, int]], policy: FairSharePolicy
) -> None:
    """Charges within one hour are counted by what they added; the memo must still agree
    with counting every bucket afresh, for decay and window alike."""
    from allot.core.fairshare import StandingsMemo

    state, now = cluster({"a": 1, "b": 2, "c": 1}, {}), 100 * HOUR_NS
    memo = StandingsMemo(state)
    for account, back, gpu_ms, step in charged:
        usage = state.usage.setdefault(account, AccountUsage())
        usage.total_gpu_ms += gpu_ms
        usage.add(now // HOUR_NS - back, gpu_ms)  # late charges too
        state.usage_version += 1  # as the fold does with every charge
        assert memo.standings(now, policy) == standings(state, now, policy)
        now += step


def test_siblings_with_equal_factors_rank_equal_and_their_jobs_go_by_submission() -> None:
    # a and z: equal weights, equal usage, so equal level factors. Whichever submits first
    # goes first; the names decide nothing.
    for first, second in [("a", "z"), ("z", "a")]:
        state = cluster(
            {"a": 1, "z": 1, "m": 1},
            {"a": [(0, 1000)], "z": [(0, 1000)], "m": [(0, 5000)]},
        )
        ranks = standings(state, now=HOUR_NS, policy=POLICY)
        assert ranks["a"].rank == ranks["z"].rank == 1
        assert ranks["m"].rank == 3  # two accounts rank before it
        submit(state, ("m-job", "m"), (f"{first}-job", first), (f"{second}-job", second))
        assert queued(state) == [f"{first}-job", f"{second}-job", "m-job"]


def test_weight_does_not_break_a_tie_of_level_factors() -> None:
    # b has twice a's weight and twice its usage: the same factor. c and d have no usage
    # yet: both come first, whatever their weights.
    state = cluster({"a": 1, "b": 2, "c": 1, "d": 3}, {"a": [(0, 1000)], "b": [(0, 2000)]})
    ranks = standings(state, now=HOUR_NS, policy=POLICY)
    assert ranks["a"].level_factor == ranks["b"].level_factor
    assert [ranks[p].rank for p in ["c", "d", "a", "b"]] == [1, 1, 3, 3]


def test_the_children_of_tied_accounts_are_ranked_together() -> None:
    # a and b tie. Among their own siblings: a/q 5, b/r and b/s 1, a/p 5/9. Ranked together,
    # b's children come between a's.
    state = cluster(
        {"a": 1, "a/p": 1, "a/q": 1, "b": 1, "b/r": 1, "b/s": 1},
        {"a/p": [(0, 900)], "a/q": [(0, 100)], "b/r": [(0, 500)], "b/s": [(0, 500)]},
    )
    ranks = standings(state, now=HOUR_NS, policy=POLICY)
    assert ranks["b/r"].rank < ranks["a/p"].rank
    assert {path: s.rank for path, s in ranks.items()} == {
        "a": 1, "b": 1, "a/q": 3, "b/r": 4, "b/s": 4, "a/p": 6,
    }  # fmt: skip
    submit(state, ("p-job", "a/p"), ("s-job", "b/s"), ("r-job", "b/r"), ("q-job", "a/q"))
    assert queued(state) == ["q-job", "s-job", "r-job", "p-job"]


def test_ties_carry_down_the_tree() -> None:
    # a and b tie, and so do their only children a/x and b/y: the children of those are
    # ranked together too. Among their own siblings: a/x/i unused, b/y/k 5/3, b/y/l 5/7,
    # a/x/h 1/2.
    state = cluster(
        dict.fromkeys(["a", "a/x", "a/x/h", "a/x/i", "b", "b/y", "b/y/k", "b/y/l"], 1),
        {"a/x/h": [(0, 100)], "b/y/k": [(0, 30)], "b/y/l": [(0, 70)]},
    )
    ranks = standings(state, now=HOUR_NS, policy=POLICY)
    assert {path: s.rank for path, s in ranks.items()} == {
        "a": 1, "b": 1, "a/x": 3, "b/y": 3, "a/x/i": 5, "b/y/k": 6, "b/y/l": 7, "a/x/h": 8,
    }  # fmt: skip


@st.composite
def forests(draw: st.DrawFn) -> tuple[list[int | None], list[int], list[int], list[int]]:
    """Accounts as (each one's parent, by index, None at the top; weights; usage of its own
    jobs), and the accounts of jobs in the order submitted. Few distinct values: many
    ties."""
    size = draw(st.integers(1, 8))
    parents = [draw(st.none() | st.integers(0, i - 1)) if i else None for i in range(size)]
    weights = draw(st.lists(st.sampled_from([1, 2]), min_size=size, max_size=size))
    used = draw(st.lists(st.sampled_from([0, 0, 1, 2, 4]), min_size=size, max_size=size))
    jobs = draw(st.lists(st.integers(0, size - 1), max_size=10))
    return parents, weights, used, jobs


@settings(max_examples=200, deadline=None)
@given(forests(), st.data())
def test_renaming_the_accounts_renames_the_ranks_and_keeps_the_queue(
    forest: tuple[list[int | None], list[int], list[int], list[int]], data: st.DataObject
) -> None:
    parents, weights, used, jobs = forest
    segments = st.lists(
        st.text(alphabet="abcxyz", min_size=1, max_size=2),
        min_size=len(parents),
        max_size=len(parents),
        unique=True,
    )

    def paths(names: list[str]) -> list[str]:
        out: list[str] = []
        for parent, name in zip(parents, names, strict=True):
            out.append(name if parent is None else f"{out[parent]}/{name}")
        return out

    def decided(accounts: list[str]) -> tuple[list[int], list[str]]:
        state = cluster(
            dict(zip(accounts, weights, strict=True)),
            {a: [(0, u)] for a, u in zip(accounts, used, strict=True) if u},
        )
        submit(state, *((f"j{n}", accounts[i]) for n, i in enumerate(jobs)))
        ranks = standings(state, now=HOUR_NS, policy=POLICY)
        return [ranks[a].rank for a in accounts], queued(state)

    before, after = paths(data.draw(segments)), paths(data.draw(segments))
    assert decided(before) == decided(after)
