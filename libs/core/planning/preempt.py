"""Phase 5: waiting jobs short of room, or of quota, that are owed GPUs (a higher tier,
funding, quota they lent, fair share) pick the cheapest running jobs to stop
(``allot.core.preemption``); the GPUs they will take are held for them until they start.
Jobs told that the free GPUs are spread too thin have work moved out of their way
(``allot.core.planning.pack``).
Jobs on draining nodes are stopped as their protection ends, those that cannot resume only
by a drain ``--now`` (``allot.core.drain``).

Where quotas share GPUs out (docs/adr/0032): a job of another account is stopped only while
that account borrows, and only as long as it still borrows before its last victim is
stopped; the waiting job's account says which jobs it may stop (``AccountPreemption``); and
victims are stopped only if the waiting job would then be admitted, quota included."""

import functools
import heapq
import itertools
from collections.abc import Iterable, Iterator

import msgspec

from allot.core.accounts import ancestry
from allot.core.budgets import fund
from allot.core.drain import draining
from allot.core.model import JobRecord
from allot.core.planning.cycle import Cycle, Demand, demand_of
from allot.core.planning.judge import SHORT_OF_ROOM
from allot.core.planning.pack import pack
from allot.core.planning.stall import unstall
from allot.core.preemption import (
    TIER_RANK,
    Grounds,
    Stoppable,
    as_victim,
    candidates,
    could_claim,
    stoppable_jobs,
    victim_order,
)
from allot.core.quota import GPU
from allot.core.victims import Allowed, Victim, choose
from allot.proto.codes import (
    DRAIN,
    FAIR_SHARE,
    FUNDED,
    LENT,
    PACK,
    QUOTA,
    RECLAIM,
    RESERVED_FOR,
    STALL,
    TIER,
    GroundCode,
    ReasonCode,
)
from allot.proto.events import (
    AccountPreemption,
    JobSpec,
    Placement,
    Preemption,
    PreemptionScope,
)

Queued = Iterable[tuple[int, JobRecord]]  # (position, job) in the planner's order
# Jobs short of room may stop others, those that fit only on GPUs set aside for a job
# ranked higher included: the reservation is not theirs to wait for, where they have
# grounds to stop work elsewhere.
_OWED_ROOM: tuple[ReasonCode, ...] = (*SHORT_OF_ROOM, RESERVED_FOR)
# Where quotas apply, stopping jobs may also give a job the quota it waits for.
_OWED_QUOTA: tuple[ReasonCode, ...] = (*_OWED_ROOM, QUOTA)


def preempt(cycle: Cycle, rest: Queued, depth: int) -> None:
    """``rest``: the jobs the cycle did not reach, in order, of which those within ``depth``
    are scanned after those it looked at."""
    allowed = frozenset(cycle.policy.grounds)
    over_share = frozenset(a for a, s in cycle.ranked.items() if s.over_share)
    chosen_victims: set[str] = set()
    running = _stoppable(cycle) if {TIER, FUNDED, FAIR_SHARE} & allowed else None
    may_claim = _may_claim(cycle, running, over_share, allowed)
    if any(may_claim.values()):
        _scan(cycle, rest, depth, running, may_claim, over_share, chosen_victims)
    if LENT in allowed:
        running = running or _stoppable(cycle)
        _reclaim_lent(cycle, running, chosen_victims)
    if STALL in allowed:
        running = running or _stoppable(cycle)
        rules = functools.partial(_within_rules, cycle)
        admits = functools.partial(_admitted_once_gone, cycle)
        unstall(cycle, running, chosen_victims, rules, admits, over_share)
    if PACK in allowed:
        rules = functools.partial(_within_rules, cycle, moved=True)
        pack(cycle, running or _stoppable(cycle), chosen_victims, rules)
    for job_id, node_id in draining(cycle.state, cycle.now):
        if job_id not in chosen_victims and DRAIN in allowed:
            cycle.preemptions.append(
                Preemption(job_id=job_id, code=DRAIN, params={"node": node_id})
            )


def _stoppable(cycle: Cycle) -> Stoppable:
    policy = cycle.policy
    # Which accounts have jobs past the time slice matters only to fair share.
    time_slice = policy.time_slice_ns if FAIR_SHARE in policy.grounds else None
    restart_ms = policy.restart_overhead_ns // 1_000_000
    if cycle.memo is not None:
        return cycle.memo.stoppable.stoppable_jobs(cycle.state, cycle.now, restart_ms, time_slice)
    return stoppable_jobs(cycle.state, cycle.now, restart_ms, time_slice)


def _may_claim(
    cycle: Cycle,
    running: Stoppable | None,
    over_share: frozenset[str],
    allowed: frozenset[GroundCode],
) -> dict[tuple[str, str], bool]:
    """(tier, account) of each waiting queue -> whether any of its jobs could have grounds
    to stop a running job: ``could_claim`` with grounds that hold for the best placed job of
    the queue (funded if a budget is on its path; reclaiming with its account's smallest
    waiting job), so a cycle where no queue could skips the scan. ``running`` is needed
    for, and given with, the grounds other than RECLAIM."""
    state = cycle.state
    budgets, claims = state.budgets, {}
    alike: dict[tuple[str, bool, bool], bool] = {}  # (tier, funded, under share) -> claim
    for tier, account in state.queues:
        funded = bool(budgets) and any(path in budgets for path in ancestry(account))
        under_share = account not in over_share
        claim = alike.get((tier, funded, under_share))
        if claim is None:
            grounds = Grounds(
                funded=funded,
                reclaims_from=frozenset(),  # judged below, where no other ground holds
                under_share=under_share,
                over_share=over_share,
                allowed=allowed,
            )
            claim = alike[tier, funded, under_share] = could_claim(running, tier, grounds)
        claims[tier, account] = claim
    unclaimed = {account for (_, account), claim in claims.items() if not claim}
    # Reclaiming asks the quota book, account by account: only for the accounts no other
    # ground lets claim, each with the fewest GPUs one of its jobs needs.
    if unclaimed and RECLAIM in allowed and cycle.quotas.active:
        smallest: dict[str, int] = {}
        for gpus in sorted(state.sized_queues):
            for _, account in state.sized_queues[gpus]:
                if account in unclaimed:
                    smallest.setdefault(account, gpus)
            if len(smallest) == len(unclaimed):
                break
        reclaims = cycle.quotas.may_reclaim
        reclaiming = {account for account, gpus in smallest.items() if reclaims(account, gpus)}
        if reclaiming:
            claims = {queue: claim or queue[1] in reclaiming for queue, claim in claims.items()}
    return claims


def _reclaims(cycle: Cycle, account: str, gpus: int) -> frozenset[str]:
    """Whom ``account`` may reclaim quota from for a job of ``gpus``."""
    if RECLAIM not in cycle.policy.grounds or not cycle.quotas.active:
        return frozenset()
    return cycle.quotas.borrowers_against(account, gpus)


def _scan(
    cycle: Cycle,
    rest: Queued,
    depth: int,
    running: Stoppable | None,
    may_claim: dict[tuple[str, str], bool],
    over_share: frozenset[str],
    chosen_victims: set[str],
) -> None:
    """Waiting jobs short of room, in queue order, pick their victims (see ``preempt``).
    Without ``running``, the policy preempts only to reclaim quota: the running jobs are
    looked at once some job could reclaim any."""
    tries = cycle.policy.preemptors_per_cycle
    # Jobs alike in what they may claim, that were owed nothing (or could not use what they
    # were owed): victims only get fewer as the cycle goes, so neither is one like them.
    owed_nothing: set[tuple[Demand, str, int]] = set()
    allowed = frozenset(cycle.policy.grounds)
    state, now, capacity = cycle.state, cycle.now, cycle.capacity
    for n, job, position in _short_of_room(cycle, rest, depth, may_claim):
        if tries == 0:
            break
        spec = job.spec
        alike = (demand_of(spec), spec.tier, spec.min_runtime_ns)
        if alike in owed_nothing:
            continue
        grounds = Grounds(  # the dearer grounds only where some running job could meet them
            funded=(running is None or running.any_unfunded)
            and fund(state, spec, now, dict(cycle.budget_reserved)),
            reclaims_from=_reclaims(cycle, spec.account, spec.total_gpus),
            under_share=spec.account not in over_share,
            over_share=over_share,
            allowed=allowed,
        )
        if not could_claim(running, spec.tier, grounds):
            owed_nothing.add(alike)
            continue
        running = running or _stoppable(cycle)  # listed once some job could claim
        if not running.jobs:
            break
        owed = _within_rules(cycle, spec, candidates(running, spec, grounds, chosen_victims))
        if not owed:
            owed_nothing.add(alike)
            continue
        tries -= 1
        models = cycle.models_of(job)
        admits = _admitted_once_gone(cycle, spec)
        own = cycle.reservation_of(job.job_id)
        # What is set aside for it is its to use; set aside still, for this cycle, after:
        # jobs behind it were told so (RESERVED_FOR). Next cycle the hold alone speaks for it.
        reclaims = grounds.reclaims_from
        if own is None:
            found = _choose(cycle, spec, models, owed, reclaims, over_share, admits)
        else:
            with capacity.lent((p.node_id, p.gpus) for p in own.set_aside):
                found = _choose(cycle, spec, models, owed, reclaims, over_share, admits)
        if found is None:
            if own is None:
                owed_nothing.add(alike)
            continue
        victims, placements = found
        code_of = {victim.job_id: code for victim, code in owed}
        stopped = [
            Preemption(job_id=v.job_id, code=code_of[v.job_id], params={"for": job.job_id})
            for v in victims
        ]
        chosen_victims.update(victim.job_id for victim in victims)
        cycle.stop_for(job, position, n, stopped, placements)
        if cycle.quotas.active:
            cycle.stopping += (cycle.quota_of(state.jobs[victim.job_id]) for victim in victims)


def _reclaim_lent(cycle: Cycle, running: Stoppable, chosen: set[str]) -> None:
    """Jobs lent GPUs set aside for a reservation are stopped (LENT) for a waiting job, in
    queue order, that would start were the cheapest of them gone, on none of the GPUs that
    the reservations made before its own (all, if it has none) count on (it would have had
    them, lent nothing). Only lent jobs of no more urgent tier than the waiting job, and only for
    one short of room or of quota, judged with the lent jobs' quota given back."""
    lent = [job for job in running.jobs if job.lent and job.job_id not in chosen]
    if not lent:
        return
    state, quotas = cycle.state, cycle.quotas
    reserved = [r for r in (cycle.reservation, *cycle.further) if r is not None]
    restart_ms = cycle.policy.restart_overhead_ns // 1_000_000
    given = [*cycle.stopping, *(cycle.quota_of(job) for job in lent)]
    tries = cycle.policy.preemptors_per_cycle
    for n in cycle.in_queue_order():
        reason = cycle.waiting[n].reason
        if tries == 0:
            return
        if reason.code not in _OWED_QUOTA or reason.job_id in state.holds:
            continue
        job = state.jobs[reason.job_id]
        rank = TIER_RANK[job.spec.tier]
        victims = [
            as_victim(j, cycle.now, restart_ms)
            for j in lent
            if j.job_id not in chosen and TIER_RANK[j.spec.tier] >= rank
        ]
        with quotas.released(given):
            models = quotas.models_allowed(job.spec, cycle.models_of(job))[0]
        if not victims or not models:
            continue
        tries -= 1
        own = cycle.reservation_of(job.job_id)
        set_aside = own.set_aside if own is not None else []
        with cycle.capacity.lent((p.node_id, p.gpus) for p in set_aside):
            found = choose(
                cycle.capacity, job.spec, models, victims, _admitted_once_lent_gone(cycle, job)
            )
        if found is None:
            continue
        stopping, placements = found
        # The GPUs counted on by the reservations made before its own (all, if it has none)
        ahead = reserved[: reserved.index(own)] if own is not None else reserved
        counted_on = {(p.node_id, g) for r in ahead for p in r.placements for g in p.gpus}
        if any((p.node_id, g) in counted_on for p in placements for g in p.gpus):
            continue  # it would take what a reservation ahead of it counts on
        stopped = [
            Preemption(job_id=v.job_id, code=LENT, params={"for": job.job_id}) for v in stopping
        ]
        chosen.update(v.job_id for v in stopping)
        cycle.stop_for(job, cycle.waiting[n].position, n, stopped, placements)


def _admitted_once_lent_gone(cycle: Cycle, job: JobRecord) -> Allowed | None:
    """Whether quota would admit the job, on GPUs of a model, with the lent jobs given gone
    (and those being stopped already). Not the rule that spares another account's nominal
    quota (P4): lent GPUs were never its to keep. None where quotas do not apply."""
    quotas, jobs = cycle.quotas, cycle.state.jobs
    if not quotas.active:
        return None

    def allowed(victims: list[Victim], model: str, at_most: bool) -> bool:
        given = [*cycle.stopping, *(cycle.quota_of(jobs[v.job_id]) for v in victims)]
        with quotas.released(given):
            return quotas.check(job.spec, model if quotas.by_model else None) is None

    return allowed


def _within_rules(
    cycle: Cycle,
    spec: JobSpec,
    owed: list[tuple[Victim, GroundCode]],
    moved: bool = False,
) -> list[tuple[Victim, GroundCode]]:
    """Of the jobs the policy's grounds let ``spec`` stop, those the quotas' rules let it:
    a job of another account only while that account borrows GPUs of their cohort, and
    what the waiting job's account allows (``AccountPreemption``). Each with its order among
    equal costs, borrowed capacity first. ``moved``: the jobs start again at once elsewhere
    (PACK), keeping what they hold: their account's nominal quota is not at stake, and only
    what the waiting job's account allows counts."""
    quotas = cycle.quotas
    if not quotas.active:
        return owed
    jobs, rules = cycle.state.jobs, _rules_of(cycle, spec.account)
    rank, need, models = TIER_RANK[spec.tier], spec.total_gpus, cycle.models_of_spec(spec)
    kept = []
    # (account, what its job holds) -> the rule that lets this job stop it (None: none),
    # the most urgent tier that rule lets it stop (an index into TIERS), and whether the
    # account borrows
    judged: dict[tuple[str, frozenset[str]], tuple[PreemptionScope | None, int, bool]] = {}
    limit = rules.borrow_max_tier
    borrowing_cap = 0 if limit is None else TIER_RANK[limit]
    # As things stand once the jobs already being stopped are gone (P4).
    with quotas.released(cycle.stopping):
        for victim, code in owed:
            job = jobs[victim.job_id]
            account = job.spec.account
            # What it holds matters only by kind: GPUs of a model only where quotas name one.
            key = (account, frozenset(cycle.quota_of(job)[1]) if quotas.by_model else _GPUS)
            if key not in judged:
                scope: PreemptionScope | None
                cap = 0
                sides = quotas.sides(spec.account, account)
                if account == spec.account:
                    scope = rules.within_account
                elif sides is None:
                    scope = "any"  # no quota between them: the policy's grounds alone
                elif not moved and quotas.borrowed(sides[1], sides[2] & key[1]) <= 0:
                    scope = None  # its nominal quota is its own
                elif quotas.borrowed(sides[0], _of_models(sides[2], models)) + need <= 0:
                    scope = rules.reclaim_within_cohort  # it is owed what it asks: reclaiming
                else:
                    scope, cap = rules.borrow_within_cohort, borrowing_cap
                judged[key] = (scope, cap, quotas.borrows(account, {}))
            scope, cap, borrowing = judged[key]
            theirs = TIER_RANK[job.spec.tier]
            if scope is None or theirs < cap or not _in_scope(scope, rank, theirs):
                continue
            if borrowing:
                victim = msgspec.structs.replace(victim, order=victim_order(job, borrowing=True))
            kept.append((victim, code))
    return kept


_GPUS = frozenset((GPU,))


def _of_models(resources: frozenset[str], models: list[str]) -> list[str]:
    """Of the GPU resources a cohort shares, those a job on one of ``models`` takes."""
    return [r for r in resources if r == GPU or r[len(GPU) + 1 :] in models]


def _in_scope(scope: PreemptionScope, rank: int, theirs: int) -> bool:
    return scope == "any" or (scope == "lower-tier" and theirs > rank)


_DEFAULT_RULES = AccountPreemption()


def _rules_of(cycle: Cycle, account: str) -> AccountPreemption:
    """The preemption rules of the nearest account on the path that states them."""
    accounts = cycle.state.accounts
    for path in ancestry(account):
        settings = accounts.get(path)
        if settings is not None and settings.preemption is not None:
            return settings.preemption
    return _DEFAULT_RULES


def _admitted_once_gone(cycle: Cycle, spec: JobSpec) -> Allowed | None:
    """Whether, with the victims gone, quota would admit the job on GPUs of a model, and
    every other account it stops jobs of still borrowed before its last one was stopped
    (what is left of its quota is its own). None where quotas do not apply."""
    quotas = cycle.quotas
    if not quotas.active:
        return None
    jobs = cycle.state.jobs

    def allowed(victims: list[Victim], model: str, at_most: bool) -> bool:
        on = model if quotas.by_model else None
        if at_most and quotas.check(spec, on) is None:
            return True  # admitted as things are: victims gone only give quota back
        given = list(cycle.stopping)  # gone too by the time this job starts
        # (side, resource) -> what its victims free of it, the most by one victim
        freed: dict[tuple[str, str], tuple[int, int]] = {}
        for victim in victims:
            account, usage = cycle.quota_of(jobs[victim.job_id])
            given.append((account, usage))
            sides = quotas.sides(spec.account, account)
            if sides is not None and account != spec.account and not at_most:
                for resource in sides[2].intersection(usage):
                    total, most = freed.get((sides[1], resource), (0, 0))
                    amount = usage[resource]
                    freed[sides[1], resource] = (total + amount, max(most, amount))
        if freed:
            with quotas.released(cycle.stopping):
                for (side, resource), (total, most) in freed.items():
                    if total - most >= quotas.borrowed(side, (resource,)):
                        return False  # its last victim would be stopped once it no longer borrows
        with quotas.released(given):
            return quotas.check(spec, on) is None

    return allowed


def _choose(
    cycle: Cycle,
    spec: JobSpec,
    models: list[str],
    owed: list[tuple[Victim, GroundCode]],
    borrowers: frozenset[str],
    over_share: frozenset[str],
    allowed: Allowed | None,
) -> tuple[list[Victim], list[Placement]] | None:
    """The cheapest victims among those ``owed``. Where the policy ranks by fair share,
    quota is reclaimed from borrowers over their share when they suffice, and from those
    under it only when they do not (as Kueue's fair sharing reclaims from the queue most
    over its share first). A borrower under its share holds its GPUs because it ranked
    first; by cost alone its jobs, having started last, would be the first stopped."""
    victims = [victim for victim, _ in owed]
    if cycle.ranked:
        jobs = cycle.state.jobs

        def over(account: str) -> bool:  # the borrowing account on its path is
            return any(a in over_share for a in ancestry(account) if a in borrowers)

        preferred = [
            victim
            for victim, code in owed
            if code != RECLAIM or over(jobs[victim.job_id].spec.account)
        ]
        if preferred and len(preferred) < len(victims):
            found = choose(cycle.capacity, spec, models, preferred, allowed)
            if found is not None:
                return found
    return choose(cycle.capacity, spec, models, victims, allowed)


def _short_of_room(
    cycle: Cycle, rest: Queued, depth: int, may_claim: dict[tuple[str, str], bool]
) -> Iterator[tuple[int | None, JobRecord, int]]:
    """Waiting jobs that lack only room (or quota, where quotas apply), of the queues that
    ``may_claim``, in queue order, as (their index in ``waiting``, or None for one the cycle
    did not look at; the job; its position). Jobs that would borrow were put back
    (``Cycle.borrows``), so some the cycle did not reach may come before some it looked at:
    the two are merged by position. ``waiting`` grows with the jobs of ``rest`` only."""
    holds, exhausted, jobs = cycle.state.holds, cycle.exhausted, cycle.state.jobs
    owed = _OWED_QUOTA if cycle.quotas.active else _OWED_ROOM
    looked: list[_Entry] = sorted(
        (w.position, n, jobs[w.reason.job_id])
        for n, w in enumerate(cycle.waiting)
        if w.reason.code in owed
    )
    unreached: Iterator[_Entry] = ((position, None, job) for position, job in rest)
    free = cycle.capacity.free_by_model
    for position, n, job in _merged(looked, unreached):
        if n is None and position > depth:
            return
        spec = job.spec
        if not may_claim[spec.tier, spec.account]:
            continue
        if job.job_id in holds or spec.account in exhausted:
            continue
        if n is not None or not spec.flavor or spec.flavor in free:
            yield n, job, position


_Entry = tuple[int, int | None, JobRecord]


def _merged(looked: list[_Entry], unreached: Iterator[_Entry]) -> Iterator[_Entry]:
    """The two, each in order, merged by position. Mostly every job looked at comes before
    every job not reached (only those put back, or passed on the way to a held job, do
    not): then they follow one another, without comparing each pair."""
    first = next(unreached, None)
    if first is None:
        return iter(looked)
    if not looked or looked[-1][0] < first[0]:
        return itertools.chain(looked, (first,), unreached)
    return heapq.merge(looked, itertools.chain((first,), unreached), key=_first)


def _first(entry: _Entry) -> int:
    return entry[0]
