"""GPU-hours owed and delivered, per account, over a window of the log (R22, the Ai2 measure).

Hour by hour: an account is *owed* its share of the cluster's capacity in that hour, capped
at its demand in that hour (the GPUs its jobs wanted, waiting or running); it was
*delivered* what it was charged in that hour. Summed over the window, delivered / owed says
whether the scheduler kept its promise. Shares are global: the product of the account's
and its ancestors' shares among their siblings, with the weights as the log ends.
"""

from collections.abc import Collection
from fractions import Fraction

import msgspec

from allot.core.accounts import ancestry, parent_of
from allot.core.fairshare import tree_weights
from allot.core.fold import LogRecord, apply_record
from allot.core.model import HOUR_NS, State
from allot.proto.events import NodeLost, NodeRegistered, UsageCharged

MS_PER_NS = 1_000_000


class OwedDelivered(msgspec.Struct, frozen=True, kw_only=True):
    account: str
    share_ppm: int  # of the whole cluster, parts per million
    owed_gpu_ms: int
    delivered_gpu_ms: int
    demand_gpu_ms: int

    @property
    def ratio(self) -> float | None:
        """Delivered / owed, for people (None when nothing was owed)."""
        return None if self.owed_gpu_ms == 0 else self.delivered_gpu_ms / self.owed_gpu_ms


def owed_and_delivered(
    records: Collection[LogRecord], window_start: int, window_end: int
) -> list[OwedDelivered]:
    """Per account (by path), over ``[window_start, window_end)``."""
    state = State()
    capacity: dict[int, int] = {}  # hour -> GPU-ms the live nodes offered
    delivered: dict[str, dict[int, int]] = {}  # account -> hour -> GPU-ms charged
    node_up: dict[str, tuple[int, int]] = {}  # node -> (since, GPUs) while it is up
    for record in records:
        event = record.event
        if isinstance(event, NodeRegistered | NodeLost) and event.node_id in node_up:
            since, gpus = node_up.pop(event.node_id)
            # A lost node offered its GPUs until it was last heard from.
            until = event.last_seen_ns if isinstance(event, NodeLost) else event.meta.at
            _spread(capacity, since, max(since, until), gpus, window_start, window_end)
        if isinstance(event, NodeRegistered):
            node_up[event.node_id] = (event.meta.at, len(event.gpus))
        ignored_before = state.ignored_count
        apply_record(state, record, records)
        if isinstance(event, UsageCharged) and state.ignored_count == ignored_before:
            per_ns = Fraction(event.gpu_ms, max(1, event.to_ns - event.from_ns))
            for account in ancestry(event.path):
                hours = delivered.setdefault(account, {})
                _spread_amount(hours, event.from_ns, event.to_ns, per_ns, window_start, window_end)
    for since, gpus in node_up.values():
        _spread(capacity, since, window_end, gpus, window_start, window_end)

    demand: dict[str, dict[int, int]] = {}
    for job in state.jobs.values():
        end = job.ended_at if job.ended_at is not None else window_end
        for account in ancestry(job.spec.account):
            _spread(
                demand.setdefault(account, {}),
                job.submitted_at,
                end,
                job.spec.total_gpus,
                window_start,
                window_end,
            )

    shares = global_shares(state)
    result = []
    for account in sorted(shares):
        share = shares[account]
        wanted = demand.get(account, {})
        owed = sum(min(int(share * capacity[h]), wanted.get(h, 0)) for h in capacity)
        result.append(
            OwedDelivered(
                account=account,
                share_ppm=int(share * 1_000_000),
                owed_gpu_ms=owed,
                delivered_gpu_ms=sum(delivered.get(account, {}).values()),
                demand_gpu_ms=sum(wanted.values()),
            )
        )
    return result


def global_shares(state: State) -> dict[str, Fraction]:
    """Each account's share of the whole cluster: its weight among its siblings, times its
    parent's share."""
    weights = tree_weights(state)
    siblings_weight: dict[str | None, int] = {}
    for path, weight in weights.items():
        parent = parent_of(path)
        siblings_weight[parent] = siblings_weight.get(parent, 0) + weight
    shares: dict[str, Fraction] = {}
    for path in sorted(weights, key=lambda p: p.count("/")):
        parent = parent_of(path)
        above = Fraction(1) if parent is None else shares[parent]
        shares[path] = above * Fraction(weights[path], siblings_weight[parent])
    return shares


def _spread(hours: dict[int, int], start: int, end: int, gpus: int, lo: int, hi: int) -> None:
    """Add ``gpus`` GPUs held over ``[start, end)`` (clipped to the window), per hour."""
    _spread_amount(hours, start, end, Fraction(gpus, MS_PER_NS), lo, hi)


def _spread_amount(
    hours: dict[int, int], start: int, end: int, per_ns: Fraction, lo: int, hi: int
) -> None:
    start, end = max(start, lo), min(end, hi)
    while start < end:
        hour = start // HOUR_NS
        stop = min(end, (hour + 1) * HOUR_NS)
        hours[hour] = hours.get(hour, 0) + int(per_ns * (stop - start))
        start = stop
