"""GPU time owed to each account, accrued as the log goes: the "owed" side of each account's
running deficit, which fair share on the ``owed`` basis compares its usage with
(docs/adr/0034).

At every moment the cluster's GPUs are owed to the accounts that want GPUs (their jobs
wait or run), max-min fairly by weight down the account tree: an account is owed its
share of its parent's part, capped at what its jobs want, and what a capped account does
not need goes to its siblings. For a flat tree that is the simulator's owed/delivered
metric (``allot.sim.metrics``), kept as the log is folded rather than hour by hour; down a
deeper tree each level shares out its own part, where the metric shares the cluster by
global shares. Whenever what accounts want, the GPUs there are or the tree changes (a
submission, a job's end, a node registered or lost, an account defined, changed or
removed) and hourly at charges, the time since the last accrual is added to each
account's owed, per hour, at the rates the water-fill gave. Rates are integers
(micro-GPUs), so every machine folds the same numbers.
"""

from allot.core.accounts import ancestry, parent_of
from allot.core.fairshare import tree_weights
from allot.core.model import HOUR_NS, AccountUsage, OwedTree, State, split

MICRO = 1_000_000  # rates are in millionths of a GPU
MAX_STEP_NS = 24 * HOUR_NS  # the longest time one accrual adds
_MICRO_GPU_NS_PER_GPU_MS = MICRO * 1_000_000  # a GPU-ms is a million GPU-ns


def accrue(state: State, at: int, hourly: bool = False) -> None:
    """Add what was owed from the last accrual until ``at`` at the rates then; call before
    changing what accounts want, the GPUs there are or the account tree. Time never runs
    back: an ``at`` before the last accrual adds nothing. ``hourly``: only if an hour has
    turned since (fair share counts usage by the hour: a charge needs no more)."""
    last = state.owed_until
    if at <= last:
        # A clock far behind the last accrual says that one was wrong (an agent's clock
        # years ahead, a forged stamp): owed goes on from here. Charges may lag, though.
        if last - at > MAX_STEP_NS and not hourly:
            state.owed_until = at
        return
    if hourly and at // HOUR_NS == last // HOUR_NS:
        return
    # At most a day at a time: one event stamped centuries ahead must neither make the
    # fold split centuries into hours nor owe them. (While jobs run, charges come hourly;
    # what waits with nothing running for a day is owed its last day only.)
    start = max(last, at - MAX_STEP_NS)
    state.owed_until = at
    rates = owed_rates(state)
    if not rates:
        return
    elapsed = at - start
    for path, rate in rates.items():
        gpu_ms = rate * elapsed // _MICRO_GPU_NS_PER_GPU_MS
        if gpu_ms <= 0:
            continue
        owed = state.owed.get(path)
        if owed is None:
            owed = state.owed[path] = AccountUsage()
        owed.total_gpu_ms += gpu_ms
        for hour, amount in split(start, at, gpu_ms, 0, HOUR_NS):
            owed.add(hour, amount)
    state.owed_version += 1


def want(state: State, account: str, gpus: int) -> None:
    """``account``'s jobs want ``gpus`` more (fewer, if negative) from now on."""
    wanted = state.wanted.get(account, 0) + gpus
    if wanted > 0:
        state.wanted[account] = wanted
    else:
        state.wanted.pop(account, None)
    state.wanted_version += 1


def owed_rates(state: State) -> dict[str, int]:
    """Path -> the micro-GPUs it is owed now, for every account owed any (ancestors
    included); computed again only once what is wanted, the nodes or the tree changed."""
    cache = state.owed_rates
    key = (state.wanted_version, state.nodes_version, state.fair_share_version)
    if cache.key != key:
        if cache.tree_version != state.fair_share_version:
            cache.tree, cache.tree_version = _tree(state), state.fair_share_version
        cache.rates, cache.key = _water_fill_tree(state, *cache.tree), key
    return cache.rates


def _tree(state: State) -> OwedTree:
    weights = tree_weights(state)
    children: dict[str | None, list[str]] = {}
    for path in sorted(weights):
        children.setdefault(parent_of(path), []).append(path)
    return weights, {path: ancestry(path) for path in weights}, children


def _water_fill_tree(
    state: State,
    weights: dict[str, int],
    ancestries: dict[str, tuple[str, ...]],
    children: dict[str | None, list[str]],
) -> dict[str, int]:
    capacity = sum(len(node.gpus) for node in state.nodes.values() if not node.lost)
    if not capacity or not state.wanted:
        return {}
    wants: dict[str, int] = {}  # path -> micro-GPUs its jobs and those below it want
    for account, gpus in state.wanted.items():
        for path in ancestries.get(account, ()):  # accounts outside the tree are owed none
            wants[path] = wants.get(path, 0) + gpus * MICRO
    rates: dict[str, int] = {}
    # Top down: each account's part is shared among its children that want GPUs; what
    # they leave (they want less) is its own jobs' (an account may have jobs and children).
    parts: list[tuple[str | None, int]] = [(None, capacity * MICRO)]
    while parts:
        parent, part = parts.pop()
        below = {path: wants[path] for path in children.get(parent, ()) if path in wants}
        if not below:  # a leaf: its part is its own jobs' (water_fill would share out nothing)
            continue
        for path, given in water_fill(part, below, weights).items():
            if given:
                rates[path] = given
                parts.append((path, given))
    return rates


def water_fill(capacity: int, wants: dict[str, int], weights: dict[str, int]) -> dict[str, int]:
    """Max-min fair parts of ``capacity`` by weight, each capped at what it wants: in
    rounds, those wanting no more than their part get what they want, and the rest share
    what is left; in integers, rounded down."""
    given = dict.fromkeys(wants, 0)
    open_ = [path for path, wanted in wants.items() if wanted > 0 and weights.get(path, 0) > 0]
    left = capacity
    while open_ and left > 0:
        total = sum(weights[path] for path in open_)
        content = [path for path in open_ if wants[path] * total <= left * weights[path]]
        if not content:
            for path in open_:
                given[path] = left * weights[path] // total
            break
        for path in content:
            given[path] = wants[path]
            left -= wants[path]
        open_ = [path for path in open_ if given[path] == 0]
    return given
