"""Hierarchical fair share in the manner of Slurm's Fair Tree.

1. Usage decays: a GPU-millisecond charged one half-life ago counts half (or, in the
   sliding-window variant, usage counts fully inside the window and not at all outside).
   Decay is computed in integers, halving per whole half-life and interpolating linearly
   inside one, so every machine folds the same numbers. An hour's usage is aged from the
   end of that hour (older than two days, from the end of its day:
   ``allot.core.model.AccountUsage``), to the start of the current hour: an hour ages
   usage by 0.4% of a 7-day half-life. Charges count at once.
2. Among siblings, an account's level factor is its share (weight / sum of sibling weights)
   divided by its usage (its decayed usage / the siblings' total). An account with no usage
   yet comes first. Standings keep the integers; factors are exact fractions of them.
3. The tree is walked depth first, siblings in order of level factor, so every account
   below a higher-ranked sibling ranks above every account below a lower one. Rank 1 is
   served first.
4. Ties as Fair Tree has them (docs/adr/0031): siblings whose level factors are equal
   (exactly; or both without usage) share a rank, and the children of tied accounts are
   ranked together as one list, each by its factor among its own siblings, and so on
   down. Weight breaks no tie (the factor holds it already), nor does a name: renaming
   accounts changes no rank. An account's rank is one more than the number of accounts
   ranked before it, so tied accounts share the rank of the first of them, and without
   ties the ranks are 1, 2, 3, ...

Accounts come from the declared tree; without one, from the accounts jobs and charges
name, each with weight 1. Jobs of an account outside the tree rank after all others.
"""

from collections.abc import Sequence
from fractions import Fraction
from itertools import groupby
from operator import itemgetter
from typing import Literal

import msgspec

from allot.core.accounts import ancestry, parent_of
from allot.core.model import HOUR_NS, AccountUsage, State
from allot.proto.events import AccountRank

DAY_NS = 24 * HOUR_NS
RESOLUTION_NS = HOUR_NS  # usage is aged to the start of the hour
_PPM = 1_000_000


class FairSharePolicy(msgspec.Struct, frozen=True, kw_only=True):
    half_life_ns: int = 7 * DAY_NS
    window_ns: int | None = None  # set: the sliding-window variant instead of decay
    # What an account's usage is held against: "share", its weight among its siblings
    # (Fair Tree); "owed", the GPU time it was owed while its jobs wanted GPUs, decayed
    # alike (``allot.core.entitlement``): usage of GPUs no one else wanted is no debt.
    basis: Literal["share", "owed"] = "share"


class Standing(msgspec.Struct, frozen=True, kw_only=True):
    """The numbers behind an account's rank, kept as integers: the ratios are exact
    fractions of them, computed only when asked for."""

    account: str
    rank: int  # 1 + the accounts ranked before it: tied accounts share one
    weight: int
    sibling_weight: int  # the weights of it and its siblings, summed
    usage_gpu_ms: int  # decayed (or windowed) usage, including everything below it
    sibling_usage_gpu_ms: int  # the usage of it and its siblings, summed

    @property
    def share(self) -> Fraction:
        return Fraction(self.weight, self.sibling_weight)

    @property
    def usage_fraction(self) -> Fraction:
        """Its part of its siblings' usage."""
        if not self.usage_gpu_ms:
            return Fraction(0)
        return Fraction(self.usage_gpu_ms, self.sibling_usage_gpu_ms)

    @property
    def level_factor(self) -> Fraction | None:
        """Share / usage fraction; None: no usage, it ranks first."""
        if not self.usage_gpu_ms:
            return None
        return Fraction(
            self.weight * self.sibling_usage_gpu_ms, self.sibling_weight * self.usage_gpu_ms
        )

    @property
    def over_share(self) -> bool:
        """It has used more than its share (level factor below 1)."""
        return self.weight * self.sibling_usage_gpu_ms < self.sibling_weight * self.usage_gpu_ms

    @property
    def share_ppm(self) -> int:
        return self.weight * _PPM // self.sibling_weight

    @property
    def usage_ppm(self) -> int:
        if not self.usage_gpu_ms:
            return 0
        return self.usage_gpu_ms * _PPM // self.sibling_usage_gpu_ms

    @property
    def level_factor_ppm(self) -> int | None:
        if not self.usage_gpu_ms:
            return None
        return (
            self.weight
            * self.sibling_usage_gpu_ms
            * _PPM
            // (self.sibling_weight * self.usage_gpu_ms)
        )


def decayed(gpu_ms: int, age_ns: int, half_life_ns: int) -> int:
    """``gpu_ms`` charged ``age_ns`` ago, halved per half-life (linear within one)."""
    if age_ns <= 0:
        return gpu_ms
    halvings, into = divmod(age_ns, half_life_ns)
    if halvings >= 63:
        return 0
    start = gpu_ms >> halvings
    return start - (start - (start >> 1)) * into // half_life_ns


def usage_at(usage: AccountUsage, now: int, policy: FairSharePolicy) -> int:
    """An account's usage as fair share counts it at ``now``: each hour's (or old day's)
    charges counted from the end of that hour (or day)."""
    return _counted(usage.by_day, now, policy) + _counted(usage.by_hour, now, policy)


def _counted(buckets: dict[int, int], now: int, policy: FairSharePolicy) -> int:
    """The buckets' usage, decayed or windowed (a sum of integers: the order does not
    matter)."""
    window = policy.window_ns
    if window is not None:
        return sum(
            gpu_ms
            for hour, gpu_ms in buckets.items()
            if max(0, now - (hour + 1) * HOUR_NS) < window
        )
    # ``decayed`` inlined: this loop runs over every bucket of history.
    half_life, total = policy.half_life_ns, 0
    for hour, gpu_ms in buckets.items():
        age = now - (hour + 1) * HOUR_NS
        if age <= 0:
            total += gpu_ms
            continue
        halvings, into = divmod(age, half_life)
        if halvings < 63:
            start = gpu_ms >> halvings
            total += start - (start - (start >> 1)) * into // half_life
    return total


class StandingsMemo:
    """Remembers each account's counted usage and the last ranking: an account's usage
    cannot change until it is charged, its old usage is merged into days, or the hour
    turns; the ranking, until some usage or the accounts change. Using the memo or not
    gives the same ranking, so replay agrees with the planner whichever it does. It
    belongs to one ``state``, and keys what it keeps on that state's versions."""

    def __init__(self, state: State) -> None:
        self.state = state
        self._usage: dict[str, _Counted] = {}  # path -> its usage as last counted
        self._owed: dict[str, _Counted] = {}  # path -> what it was owed, as last counted
        # The tree as of a version of the accounts: weights, and each parent's children.
        self._tree: tuple[int, dict[str, int], _Children] | None = None
        self._key: tuple[object, ...] | None = None
        self._unchanged: tuple[object, ...] | None = None
        self._value: dict[str, Standing] = {}
        self._ranks: dict[str, AccountRank] = {}

    def standings(self, now: int, policy: FairSharePolicy) -> dict[str, Standing]:
        state = self.state
        now -= now % RESOLUTION_NS
        # Nothing charged (or owed, on that basis), no account added (a job's new account
        # is one), the same hour: the same ranking.
        owed = state.owed_version if policy.basis == "owed" else None
        unchanged = (state.fair_share_version, state.usage_version, owed, now, policy)
        if unchanged == self._unchanged:
            return self._value
        tree = state.fair_share_version
        if self._tree is None or self._tree[0] != tree:
            weights = tree_weights(state)
            self._tree = (tree, weights, _children_of(weights))
        _, weights, children = self._tree
        usage = {
            path: _counted_at(self._usage, path, state.usage.get(path), now, policy)
            for path in weights
        }
        if policy.basis == "owed":
            weights = _owed_weights(
                {path: _counted_at(self._owed, path, state.owed.get(path), now, policy)
                 for path in weights}
            )  # fmt: skip
        key = (
            state.fair_share_version, now, policy, tuple(usage.values()), tuple(weights.values())
        )  # fmt: skip
        if key != self._key:
            self._key, self._value = key, _ranked(weights, usage, children)
            self._ranks = {}
        self._unchanged = unchanged
        return self._value

    def account_rank(self, account: str) -> AccountRank:
        """An account's standing in the last ranking, as plans state it: converted once per
        ranking, and only for the accounts a plan states (those with waiting jobs)."""
        rank = self._ranks.get(account)
        if rank is None:
            rank = self._ranks[account] = account_rank(self._value[account])
        return rank


def _counted_at(
    counted: dict[str, "_Counted"],
    path: str,
    usage: AccountUsage | None,
    now: int,
    policy: FairSharePolicy,
) -> int:
    """``usage`` (an account's usage, or what it was owed) counted at ``now``, from what
    ``counted`` kept of it last time, kept there again."""
    if usage is None:
        return 0
    # Charges only add. Within one hour and before a merge into days, the days change
    # only by a late charge, and the hours only where a charge added to them.
    seen = counted.get(path)
    if (
        seen is None
        or seen.at != now
        or seen.daily_before != usage.daily_before
        or seen.policy != policy
    ):
        seen = counted[path] = _Counted(usage, now, policy)
    if seen.late_charges != usage.late_charges:
        seen.days, seen.late_charges = _counted(usage.by_day, now, policy), usage.late_charges
    if seen.total != usage.total_gpu_ms:
        # Charges only add, mostly to the latest hours: look back from the latest until
        # the hours charged since add up to what the total grew by (a late charge to a
        # day never does: then every hour is looked at).
        grown, was, got = usage.total_gpu_ms - seen.total, {}, {}
        for hour in reversed(usage.by_hour):
            gpu_ms, before = usage.by_hour[hour], seen.by_hour.get(hour)
            if gpu_ms != before:
                got[hour] = gpu_ms
                if before is not None:
                    was[hour] = before
                grown -= gpu_ms - (before or 0)
                if not grown:
                    break
        seen.hours += _counted(got, now, policy) - _counted(was, now, policy)
        seen.total = usage.total_gpu_ms
        seen.by_hour.update(got)
    return seen.days + seen.hours


class _Counted:
    """An account's usage as counted at the start of an hour ``at``: its days and its
    hours, what they were counted from, and the hours' buckets then (to count again only
    what a charge changed)."""

    __slots__ = ("at", "by_hour", "daily_before", "days", "hours", "late_charges", "policy",
                 "total")  # fmt: skip

    def __init__(self, usage: AccountUsage, at: int, policy: FairSharePolicy):
        self.at, self.policy, self.daily_before = at, policy, usage.daily_before
        self.days, self.late_charges = _counted(usage.by_day, at, policy), usage.late_charges
        self.hours, self.total = _counted(usage.by_hour, at, policy), usage.total_gpu_ms
        self.by_hour = dict(usage.by_hour)


def standings(state: State, now: int, policy: FairSharePolicy) -> dict[str, Standing]:
    """Every account's rank and the numbers behind it, with usage aged to the start of
    ``now``'s hour."""
    now -= now % RESOLUTION_NS
    weights = tree_weights(state)
    usage = {
        path: usage_at(state.usage[path], now, policy) if path in state.usage else 0
        for path in weights
    }
    children = _children_of(weights)
    if policy.basis == "owed":
        weights = _owed_weights(
            {path: usage_at(state.owed[path], now, policy) if path in state.owed else 0
             for path in weights}
        )  # fmt: skip
    return _ranked(weights, usage, children)


def _owed_weights(owed: dict[str, int]) -> dict[str, int]:
    """The weights of the ``owed`` basis: each account's counted owed GPU-ms, plus one, so
    that an account owed nothing yet has a weight (and its siblings a sum) above 0."""
    return {path: gpu_ms + 1 for path, gpu_ms in owed.items()}


_Children = dict[str | None, list[str]]  # parent (None: the top) -> its children, by path


def _children_of(weights: dict[str, int]) -> _Children:
    children: _Children = {}
    for path in sorted(weights):
        children.setdefault(parent_of(path), []).append(path)
    return children


def _ranked(
    weights: dict[str, int], usage: dict[str, int], children: _Children
) -> dict[str, Standing]:
    result: dict[str, Standing] = {}
    _rank_together([None], weights, usage, children, result)
    return result


def _rank_together(
    parents: Sequence[str | None],
    weights: dict[str, int],
    usage: dict[str, int],
    children: _Children,
    result: dict[str, Standing],
) -> None:
    """Rank the children of ``parents`` (the top, or accounts tied with each other) as one
    list into ``result``: each run of tied ones gets one rank and is followed by its own
    children ranked together (a function of its own, not a closure: a recursive closure
    would hold itself, and every ranking would leave garbage for the collector). Each
    account's level factor is the one among its own siblings; Fair Tree compares them
    across parents all the same."""
    keyed: list[tuple[_FactorKey, str, int, int]] = []
    for parent in parents:
        siblings = children.get(parent, [])
        total_weight = sum(weights[p] for p in siblings)
        total_usage = sum(usage[p] for p in siblings)
        for path in siblings:
            factor = _factor_key(weights[path] * total_usage, total_weight * usage[path])
            keyed.append((factor, path, total_weight, total_usage))
    # Stable: a run of ties stays in the order of ``parents`` and of paths, which only
    # lists them; every one of them gets the same rank.
    keyed.sort(key=itemgetter(0))
    for _, run in groupby(keyed, key=itemgetter(0)):
        rank, tied = len(result) + 1, []
        for _, path, total_weight, total_usage in run:
            result[path] = Standing(
                account=path,
                rank=rank,
                weight=weights[path],
                sibling_weight=total_weight,
                usage_gpu_ms=usage[path],
                sibling_usage_gpu_ms=total_usage,
            )
            tied.append(path)
        if any(path in children for path in tied):  # leaves (most accounts) have none to rank
            _rank_together(tied, weights, usage, children, result)


class _HighestFirst:
    """The ratio ``a / b`` (b > 0) as a sort key, highest first, compared exactly in
    integers: cheaper than a Fraction, which reduces itself on creation."""

    __slots__ = ("a", "b")

    def __init__(self, a: int, b: int):
        self.a, self.b = a, b

    def __lt__(self, other: "_HighestFirst") -> bool:
        return self.a * other.b > other.a * self.b

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _HighestFirst) and self.a * other.b == other.a * self.b

    __hash__ = None  # type: ignore[assignment]


# A level factor as a sort key, highest first: (False,) for no usage yet, which comes
# first; else (True, its floor, the exact ratio).
_FactorKey = tuple[bool] | tuple[bool, int, _HighestFirst]


def _factor_key(share: int, used: int) -> _FactorKey:
    """The level factor ``share / used`` (weight x siblings' usage over siblings' weight x
    usage; ``used`` 0: no usage yet) as a sort key. share * 2**64 // used decides unless
    two are equal (the floor never reverses an order), then the exact ratio does: equal
    keys are equal factors."""
    if not used:
        return (False,)
    return (True, -((share << 64) // used), _HighestFirst(share, used))


def account_rank(standing: Standing) -> AccountRank:
    """An account's standing as plans record it, in integers."""
    return AccountRank(
        account=standing.account,
        rank=standing.rank,
        share_ppm=standing.share_ppm,
        usage_ppm=standing.usage_ppm,
        usage_gpu_ms=standing.usage_gpu_ms,
        level_factor_ppm=standing.level_factor_ppm,
    )


def tree_weights(state: State) -> dict[str, int]:
    """Path -> weight: the declared tree; without one, every account jobs or charges name
    (and its ancestors), with weight 1."""
    if state.accounts:
        return {path: settings.weight for path, settings in state.accounts.items()}
    weights: dict[str, int] = {}
    for account in [*state.job_accounts, *state.usage]:
        for path in ancestry(account):
            weights.setdefault(path, 1)
    return weights
