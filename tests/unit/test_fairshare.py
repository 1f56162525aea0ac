import random
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from allot.core import State
from allot.core.fairshare import DAY_NS, FairSharePolicy, decayed, standings
from allot.core.model import HOUR_NS, AccountUsage
from allot.proto.events import AccountSettings

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
