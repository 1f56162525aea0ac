"""Properties of admission and preemption under quotas, over random states
(docs/adr/0032): a preemption is issued only if the waiting job is admitted once its
victims are gone, and work within its nominal quota is never behind work that borrows."""

from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from allot.core import State, apply, plan
from allot.core.accounts import ancestry, parent_of
from allot.core.placement import Capacity
from allot.core.policies import POLICIES
from allot.core.quota import QuotaBook, needs
from allot.core.topology import model_of
from allot.proto.events import (
    AccountDefined,
    AccountPreemption,
    AccountSettings,
    Event,
    JobCheckpointed,
    StopRequested,
)
from tests import builders as b
from tests.builders import fold

S = 10**9
HOUR = 3600 * S
NOW = 10 * HOUR
TIERS = ["interactive", "batch", "best-effort"]
SCOPES = ["never", "lower-tier", "any"]
ACCOUNTS = ["org/a", "org/b", "c"]

limits = st.one_of(st.none(), st.integers(0, 8))
account_settings = st.tuples(
    st.integers(0, 12),  # quota
    limits,  # borrowing limit
    limits,  # lending limit
    st.one_of(
        st.none(),
        st.tuples(st.sampled_from(SCOPES), st.sampled_from(SCOPES), st.sampled_from(SCOPES)),
    ),
)
run = st.tuples(
    st.sampled_from(ACCOUNTS),
    st.sampled_from([1, 2, 4]),  # GPUs
    st.sampled_from(TIERS),
    st.booleans(),  # resumable
    st.integers(1, 6),  # hours ago it started
)
wait = st.tuples(st.sampled_from(ACCOUNTS), st.sampled_from([1, 2, 4, 8]), st.sampled_from(TIERS))


def tree(org_quota: int | None, settings: list[Any]) -> list[Event]:
    events: list[Event] = [
        AccountDefined(
            meta=b.meta(),
            path="org",
            settings=AccountSettings(quota={} if org_quota is None else {"gpu": org_quota}),
        )
    ]
    for path, (quota, borrowing, lending, scopes) in zip(ACCOUNTS, settings, strict=True):
        rules = None
        if scopes is not None:
            within, reclaim, borrow = scopes
            rules = AccountPreemption(
                within_account=within, reclaim_within_cohort=reclaim, borrow_within_cohort=borrow
            )
        events.append(
            AccountDefined(
                meta=b.meta(),
                path=path,
                settings=AccountSettings(
                    quota={"gpu": quota},
                    borrowing_limit={} if borrowing is None else {"gpu": borrowing},
                    lending_limit={} if lending is None else {"gpu": min(lending, quota)},
                    preemption=rules,
                ),
            )
        )
    return events


def scenario(
    nodes: list[int],
    org_quota: int | None,
    settings: list[Any],
    runs: list[Any],
    waits: list[Any],
) -> State:
    events = [b.node(f"n{i}", gpus) for i, gpus in enumerate(nodes)]
    events += tree(org_quota, settings)
    free = {f"n{i}": list(range(gpus)) for i, gpus in enumerate(nodes)}
    for n, (account, gpus, tier, resumable, hours) in enumerate(runs):
        node = next((k for k, v in free.items() if len(v) >= gpus), None)
        if node is None:
            continue
        taken, free[node] = free[node][:gpus], free[node][gpus:]
        job = f"r{n}"
        events += [
            b.submitted(job, gpus, account=account, tier=tier, resumable=resumable),
            b.plan((job, node, taken)),
            msgspec.structs.replace(b.started(job, node, taken), meta=b.meta(NOW - hours * HOUR)),
            JobCheckpointed(meta=b.meta(NOW - HOUR), job_id=job, node_id=node, path="/c", step=1),
        ]
    for n, (account, gpus, tier) in enumerate(waits):
        events.append(b.submitted(f"w{n}", gpus, account=account, tier=tier, at=NOW + n))
    return fold(*events)


states = st.builds(
    scenario,
    st.lists(st.sampled_from([4, 8]), min_size=1, max_size=2),
    st.one_of(st.none(), st.integers(0, 16)),
    st.lists(account_settings, min_size=3, max_size=3),
    st.lists(run, min_size=3, max_size=10),
    st.lists(wait, min_size=1, max_size=6),
)


@settings(max_examples=400, deadline=None)
@given(states, st.sampled_from(["allot", "kueue"]))
def test_a_preemption_is_issued_only_if_its_job_is_admitted_once_the_victims_are_gone(
    state: State, policy_name: str
) -> None:
    policy = POLICIES[policy_name]
    decided = plan(state, NOW, policy)
    held = {h.job_id for h in decided.holds if h.placements}
    assert {p.params["for"] for p in decided.preemptions if "for" in p.params} <= held
    if not held:
        return
    apply(
        state,
        state.seq + 1,
        msgspec.structs.replace(b.plan(), preemptions=decided.preemptions, holds=decided.holds),
    )
    for chosen in decided.preemptions:
        job = state.jobs[chosen.job_id]
        stop = StopRequested(meta=b.meta(NOW), job_id=job.job_id, grace_ns=S, reason=chosen.code)
        apply(state, state.seq + 1, stop)
        for node in list(job.placements):
            exit_ = msgspec.structs.replace(b.exited(job.job_id, node, 0), stopped_in_ns=S)
            apply(state, state.seq + 1, exit_)
    after = plan(state, NOW + S, policy)
    assert held <= {a.job_id for a in after.admissions}


@settings(max_examples=250, deadline=None)
@given(states, st.sampled_from(["allot", "kueue"]))
def test_work_within_its_nominal_quota_is_never_behind_work_that_borrows(
    state: State, policy_name: str
) -> None:
    # Every job looked at, nothing set aside or stopped: only the order of admissions speaks.
    policy = msgspec.structs.replace(POLICIES[policy_name], backfill=False, preemption=False)
    decided = plan(state, NOW, policy, whole_queue=True)
    book, capacity = QuotaBook(state), Capacity.of(state)
    used = {path: usage.get("gpu", 0) for path, usage in state.quota_used.items()}
    borrowed: list[str] = []
    for admission in decided.admissions:  # in the order the cycle admitted them
        spec = state.jobs[admission.job_id].spec
        if borrows(state, used, spec.account, spec.total_gpus):
            borrowed.append(admission.job_id)
            continue
        assert not borrowed, f"{admission.job_id} within its quota came after {borrowed}"
        gpus = sum(len(p.gpus) for p in admission.placements)
        book.charge(spec.account, needs(spec, model_of(state.nodes["n0"]), gpus))
        for path in ancestry(spec.account):
            used[path] = used.get(path, 0) + gpus
        for placement in admission.placements:
            capacity.take(placement.node_id, placement.gpus)
    # What was left after the work within quota was admitted: none of the jobs left
    # waiting that are within their quota fitted there, so none waits for a borrower.
    for waiting in decided.waiting:
        spec = state.jobs[waiting.reason.job_id].spec
        if borrows(state, used, spec.account, spec.total_gpus):
            continue
        models = book.models_allowed(spec, capacity.models)[0]
        assert capacity.place(spec.workers, spec.gpus, spec.topology, models) is None, (
            f"{spec} waits ({waiting.reason.code}) though it fits within its quota"
        )


def borrows(state: State, used: dict[str, int], account: str, gpus: int) -> bool:
    """The rule, written out: holding ``gpus`` more puts an account of the path past its
    nominal GPU quota, where it or a sibling declares one."""
    for path in ancestry(account):
        parent = parent_of(path)
        siblings = [p for p in state.accounts if parent_of(p) == parent]
        if any("gpu" in state.accounts[p].quota for p in siblings):
            settings = state.accounts.get(path)
            quota = settings.quota.get("gpu", 0) if settings is not None else 0
            if used.get(path, 0) + gpus > quota:
                return True
    return False
