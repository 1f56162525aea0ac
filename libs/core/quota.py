"""Nominal quotas, borrowing and lending within a cohort (R2), in the manner of Kueue.

The children of one account (or the top-level accounts) form a cohort for each resource
one of them declares a quota for; a sibling without one has a quota of 0 and can only
borrow. Resources: ``gpu``, ``gpu:<model>``, ``cpu``, ``memory_mib``.

For an account A of a cohort, with nominal quota q, lending limit l (default q) and
borrowing limit b (default: none), and u what its running jobs (and its descendants')
hold:

1. A may hold at most q + b.
2. Of its quota, q - l is guaranteed to A alone; the rest goes into the cohort's pool.
   Every member holds at least its guaranteed part, so the cohort fits when
   sum over members of max(u, q - l) <= K, where K is the parent's quota for the resource
   or, for a parent without one and for the top level, what the cluster has of it.

Quota not used is lent; getting it back by preempting borrowers is the preemption
issue's business. A job is checked at every level of its path, leaf first.
"""

import contextlib
import sys
from collections.abc import Iterable, Iterator

import msgspec

from allot.core.accounts import ancestry, parent_of
from allot.core.model import State
from allot.core.topology import model_of
from allot.proto.events import JobSpec

GPU = "gpu"
Usage = dict[str, int]  # resource -> amount


class QuotaBlock(msgspec.Struct, frozen=True, kw_only=True):
    """Why a job does not fit its quota: the account and resource that stop it."""

    account: str
    resource: str
    need: int
    available: int


def needs(spec: JobSpec, model: str | None, gpus: int | None = None) -> Usage:
    """What a job holds of each resource once placed on ``model`` (with ``gpus`` in all)."""
    amounts = gpu_amounts(spec.total_gpus if gpus is None else gpus, model)
    if spec.cpus:
        amounts["cpu"] = spec.cpus * spec.workers
    if spec.memory_mib:
        amounts["memory_mib"] = spec.memory_mib * spec.workers
    return amounts


def is_gpu(resource: str) -> bool:
    return resource == GPU or resource.startswith(GPU + ":")


def gpu_amounts(gpus: int, model: str | None) -> Usage:
    return {GPU: gpus} if model is None else {GPU: gpus, f"{GPU}:{model}": gpus}


class QuotaFrame:
    """What a quota book reads that changes only with the accounts or the nodes: the
    cohorts, the resources each limits, and what the cluster has. A planner keeps one
    between cycles (``allot.core.planning.PlanMemo``)."""

    def __init__(self, state: State):
        self.settings = state.accounts
        self.children: dict[str, list[str]] = {}
        for path in sorted(state.accounts):
            self.children.setdefault(parent_of(path) or "", []).append(path)
        # cohort (parent path, "" for the top) -> resources some child declares a quota for
        self.managed: dict[str, frozenset[str]] = {
            parent: frozenset(r for child in children for r in state.accounts[child].quota)
            for parent, children in self.children.items()
        }
        self.limited: dict[str, frozenset[str]] = {  # account -> resources it caps borrowing of
            path: frozenset(settings.borrowing_limit) for path, settings in state.accounts.items()
        }
        self.active = any(self.managed.values()) or any(self.limited.values())
        self.by_model = any(r.startswith(GPU + ":") for rs in self.managed.values() for r in rs)
        self.capacity = _capacity(state) if self.active else {}
        self.paths: dict[str, list[tuple[str, str, tuple[str, ...]]]] = {}  # see QuotaBook._path
        self.sides: dict[tuple[str, str], tuple[str, str, frozenset[str]] | None] = {}
        # (account, resource) -> what it keeps for itself of its quota: quota - lendable
        self.guaranteed: dict[tuple[str, str], int] = {}
        for path, settings in state.accounts.items():
            for resource, quota in settings.quota.items():
                lendable = min(settings.lending_limit.get(resource, quota), quota)
                if quota > lendable:
                    self.guaranteed[path, resource] = quota - lendable


class QuotaBook:
    """Quota use of one planning cycle: filled from the running jobs, then charged with
    each admission of the cycle."""

    def __init__(self, state: State, frame: QuotaFrame | None = None):
        frame = frame or QuotaFrame(state)
        self._settings, self._children = frame.settings, frame.children
        self._managed, self._limited = frame.managed, frame.limited
        self.active, self.by_model = frame.active, frame.by_model
        self._capacity, self._paths = frame.capacity, frame.paths
        self._guaranteed = frame.guaranteed
        self._used: dict[str, Usage] = {}
        self.version = 0  # one more with every charge: refusals older than it may have changed
        # (cohort, resource) -> sum over its members of max(used, guaranteed), kept current
        self._cohort_held: dict[tuple[str, str], int] = {}
        self._cohort_used: dict[tuple[str, str], int] = {}  # sum of members' use
        # (account, wanted) -> the (path, resource) that refused it. Use only grows within a
        # cycle, so what was refused stays refused; only its room is read again.
        self._refused: dict[tuple[str, tuple[tuple[str, int], ...]], tuple[str, str]] = {}
        # (account, wanted) -> the version at which it was last allowed.
        self._allowed: dict[tuple[str, tuple[tuple[str, int], ...]], int] = {}
        # (account, GPUs) -> the version, and whom it could reclaim from then.
        self._borrowers: dict[tuple[str, int], tuple[int, frozenset[str]]] = {}
        self._over: dict[str, tuple[int, frozenset[str]]] = {}  # cohort -> version, borrowers
        # Shared with the state's until the cycle charges a path: ``charge`` copies its own.
        self._charged: set[str] = set()
        self._trying = 0  # inside ``released``: use may have shrunk, so no refusal is known
        self._sides = frame.sides
        if self.active:
            self._used = dict(state.quota_used)
        strays: dict[str, list[str]] = {}  # parent -> members in use but not declared
        for path in self._used:
            if path not in self._settings:
                strays.setdefault(parent_of(path) or "", []).append(path)
        nothing: Usage = {}
        for parent, resources in self._managed.items():
            members = self._children.get(parent, []) + strays.get(parent, [])
            for resource in resources:
                held = used = 0
                for member in members:
                    amount = self._used.get(member, nothing).get(resource, 0)
                    used += amount
                    held += max(amount, self._guaranteed.get((member, resource), 0))
                self._cohort_held[parent, resource] = held
                self._cohort_used[parent, resource] = used

    def check(self, spec: JobSpec, model: str | None) -> QuotaBlock | None:
        """The first limit a job on ``model`` would break, leaf first, or None."""
        return self.check_amounts(spec.account, needs(spec, model))

    def check_amounts(self, account: str, wanted: Usage) -> QuotaBlock | None:
        """The first limit taking ``wanted`` more would break for ``account``, leaf first."""
        if not self.active:
            return None
        # ``needs`` and ``gpu_amounts`` list resources in one order (another would only miss)
        if self._trying:
            return self._first_block(account, wanted)
        key = (account, tuple(wanted.items()))
        refused = self._refused.get(key)
        if refused is not None:
            path, resource = refused
            return self._block(path, resource, wanted[resource])
        if self._allowed.get(key) == self.version:
            return None  # allowed, and nothing was charged since
        block = self._first_block(account, wanted)
        if block is None:
            self._allowed[key] = self.version
        else:
            self._refused[key] = (block.account, block.resource)
        return block

    def _first_block(self, account: str, wanted: Usage) -> QuotaBlock | None:
        for path, _, limited in self._path(account):
            for resource in limited:
                if resource in wanted:
                    block = self._block(path, resource, wanted[resource])
                    if block is not None:
                        return block
        return None

    def borrows(self, account: str, wanted: Usage) -> bool:
        """Whether holding ``wanted`` more puts the account, or an account above it, past its
        nominal quota of a resource its cohort shares out: whether it would borrow. With
        nothing wanted: whether it borrows now."""
        if not self.active:
            return False
        nothing: Usage = {}
        for path, parent, _ in self._path(account):
            managed = self._managed.get(parent, frozenset())
            settings = self._settings.get(path)
            quota = settings.quota if settings is not None else nothing
            used = self._used.get(path, nothing)
            for resource in managed & wanted.keys() if wanted else managed:
                if used.get(resource, 0) + wanted.get(resource, 0) > quota.get(resource, 0):
                    return True
        return False

    def sides(self, account: str, other: str) -> tuple[str, str, frozenset[str]] | None:
        """The accounts of ``account``'s path and of ``other``'s that are members of one
        cohort (children of their nearest common ancestor, or top-level accounts), and the
        GPU resources (``gpu``, ``gpu:<model>``) that cohort shares out; None when it
        shares none, or the two are one account: no quota stands between them."""
        if (account, other) in self._sides:
            return self._sides[account, other]
        found = None
        mine = {parent_of(path) or "": path for path in ancestry(account)}
        for path, parent, _ in self._path(other):
            if parent in mine:
                gpus = frozenset(r for r in self._managed.get(parent, ()) if is_gpu(r))
                if gpus and mine[parent] != path:
                    found = (mine[parent], path, gpus)
                break
        self._sides[account, other] = found
        return found

    def borrowed(self, path: str, resources: Iterable[str]) -> int:
        """The most the account holds beyond its nominal quota of any of ``resources``
        (negative: short of it by that much at least)."""
        settings = self._settings.get(path)
        quota = settings.quota if settings is not None else {}
        used = self._used.get(path, {})
        return max((used.get(r, 0) - quota.get(r, 0) for r in resources), default=0)

    @contextlib.contextmanager
    def released(self, holdings: Iterable[tuple[str, Usage]]) -> Iterator[None]:
        """Quota use as if the (account, amounts) held were given back, as stopping running
        jobs would: for asking whether a waiting job would then be admitted."""
        given: dict[str, Usage] = {}  # summed by account: charged once each, not per job
        for account, amounts in holdings:
            summed = given.setdefault(account, {})
            for resource, amount in amounts.items():
                summed[resource] = summed.get(resource, 0) + amount
        for account, amounts in given.items():
            self.charge(account, {resource: -amount for resource, amount in amounts.items()})
        self._trying += 1
        try:
            yield
        finally:
            self._trying -= 1
            for account, amounts in given.items():
                self.charge(account, amounts)

    def charge(self, account: str, amounts: Usage) -> None:
        if not self.active:
            return
        self.version += 1
        for path, parent, _ in self._path(account):
            if path not in self._charged:
                self._charged.add(path)
                self._used[path] = dict(self._used.get(path, {}))
            used = self._used[path]
            managed = self._managed.get(parent, frozenset())
            for resource, amount in amounts.items():
                before = self._held(path, resource)
                used[resource] = used.get(resource, 0) + amount
                if resource in managed:
                    self._cohort_held[parent, resource] += self._held(path, resource) - before
                    self._cohort_used[parent, resource] += amount

    def borrowers_against(self, account: str, need: int) -> frozenset[str]:
        """Accounts holding GPUs beyond their quota in a cohort where ``account`` (or an
        ancestor) would still be within its own with ``need`` more: what it may reclaim."""
        known = self._borrowers.get((account, need))
        if known is not None and known[0] == self.version:
            return known[1]  # nothing charged since
        found: frozenset[str] = frozenset()
        for path, parent, _ in self._path(account):
            settings = self._settings.get(path)
            quota = None if settings is None else settings.quota.get(GPU)
            if quota is not None and self._used.get(path, {}).get(GPU, 0) + need <= quota:
                found |= self._over_quota(parent) - {path}
        self._borrowers[account, need] = (self.version, found)
        return found

    def may_reclaim(self, account: str, need: int) -> bool:
        """Whether ``borrowers_against`` names anyone, without naming them: asked of every
        account with waiting jobs, every cycle."""
        for path, parent, _ in self._path(account):
            settings = self._settings.get(path)
            quota = None if settings is None else settings.quota.get(GPU)
            if quota is not None and self._used.get(path, {}).get(GPU, 0) + need <= quota:
                over = self._over_quota(parent)
                if len(over) > (path in over):  # some member over its quota besides it
                    return True
        return False

    def _over_quota(self, parent: str) -> frozenset[str]:
        """The members of a cohort holding more GPUs than their quota."""
        known = self._over.get(parent)
        if known is None or known[0] != self.version:
            over = frozenset(
                child
                for child in self._children.get(parent, [])
                if self._used.get(child, {}).get(GPU, 0) > self._settings[child].quota.get(GPU, 0)
            )
            known = self._over[parent] = (self.version, over)
        return known[1]

    def _path(self, account: str) -> list[tuple[str, str, tuple[str, ...]]]:
        """The account and its ancestors, leaf first: (path, its cohort, the resources
        limited for it there, in name order)."""
        path = self._paths.get(account)
        if path is None:
            path = self._paths[account] = []
            for a in ancestry(account):
                parent = parent_of(a) or ""
                limited = self._managed.get(parent, frozenset()) | self._limited.get(a, frozenset())
                path.append((a, parent, tuple(sorted(limited))))
        return path

    def _block(self, path: str, resource: str, need: int) -> QuotaBlock | None:
        room = self._room(path, parent_of(path) or "", resource, need)
        if room >= need:
            return None
        return QuotaBlock(account=path, resource=resource, need=need, available=max(0, room))

    def models_allowed(
        self, spec: JobSpec, models: Iterable[str]
    ) -> tuple[list[str], QuotaBlock | None]:
        """The GPU models the job's quota lets it use, and the block of the first refused."""
        if not self.by_model:
            block = self.check(spec, None)
            return ([] if block else list(models)), block
        allowed, first = [], None
        for model in models:
            block = self.check(spec, model)
            if block is None:
                allowed.append(model)
            elif first is None:
                first = block
        return allowed, (None if allowed else first)

    def _room(self, account: str, parent: str, resource: str, need: int) -> int:
        """How much more of ``resource`` the account may take at this level."""
        settings = self._settings.get(account)
        quota = settings.quota.get(resource, 0) if settings else 0
        used = self._used.get(account, {}).get(resource, 0)
        room = sys.maxsize
        if settings is not None and resource in settings.borrowing_limit:
            room = quota + settings.borrowing_limit[resource] - used
        if resource not in self._managed.get(parent, frozenset()):
            return room
        held = self._cohort_held[parent, resource]
        # Taking n more grows the account's term max(u, g) by max(0, u + n - max(u, g)).
        mine = self._held(account, resource)
        parent_settings = self._settings.get(parent)
        if parent_settings is not None and resource in parent_settings.quota:
            cohort_room = parent_settings.quota[resource] - held + (mine - used)
        elif self._capacity.get(resource):
            cohort_room = self._capacity[resource] - held + (mine - used)
            # The size is what the cluster has: a job too big even for the quota others
            # keep unused is short of room, not of quota; placement says so, and may hold
            # GPUs for it.
            others_kept = (held - mine) - (self._cohort_used[parent, resource] - used)
            if need > cohort_room + others_kept:
                cohort_room = sys.maxsize
        else:  # nothing says how much there is: only the borrowing limit binds
            return room
        return min(room, cohort_room)

    def _held(self, account: str, resource: str) -> int:
        """max(used, guaranteed): what the account takes from its cohort's size."""
        used = self._used.get(account, {}).get(resource, 0)
        return max(used, self._guaranteed.get((account, resource), 0))


def _capacity(state: State) -> Usage:
    """What the cluster has of each resource; cordoned nodes' GPUs count (what runs there
    counts as used), lost nodes' do not."""
    capacity: Usage = {}
    for node in state.nodes.values():
        if not node.lost:
            for resource, amount in (
                (GPU, len(node.gpus)),
                (f"{GPU}:{model_of(node)}", len(node.gpus)),
                ("cpu", node.cpus),
                ("memory_mib", node.memory_mib),
            ):
                capacity[resource] = capacity.get(resource, 0) + amount
    return capacity
