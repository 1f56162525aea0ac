"""No decision depends on how nodes, jobs or accounts are named: a plan of a log whose names
are all replaced is the plan of the original log, renamed. Ties between nodes go to the
node the log registered first (its first registration); between victims alike, the one
submitted last is stopped (docs/adr/0032, P6); GPUs released at the same time go in
submission order."""

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from allot.core import DEFAULT_POLICY, PlanMemo, State, apply, plan
from allot.core.planning import Plan, Policy
from allot.core.policies import POLICIES
from allot.proto.events import (
    AccountDefined,
    AccountSettings,
    Admission,
    BudgetGranted,
    Event,
    GpuInfo,
    JobSpec,
    JobStarted,
    JobSubmitted,
    Meta,
    NodeCordoned,
    NodeLost,
    NodeRegistered,
    Placement,
    PlanComputed,
    UsageCharged,
)
from tests import builders as b
from tests.builders import fold

S = 10**9
HOUR = 3600 * S
NOW = 100 * HOUR


def placements_of(decided: Plan) -> dict[str, list[tuple[str, list[int]]]]:
    return {a.job_id: [(p.node_id, p.gpus) for p in a.placements] for a in decided.admissions}


@pytest.mark.parametrize(("first", "second"), [("b", "a"), ("a", "b")])
def test_of_two_alike_free_nodes_a_job_goes_to_the_one_registered_first(
    first: str, second: str
) -> None:
    state = fold(b.node(first, 4), b.node(second, 4), b.submitted("j", 1))
    assert placements_of(plan(state, NOW, DEFAULT_POLICY)) == {"j": [(first, [0])]}


def test_a_node_lost_and_registered_again_keeps_its_place() -> None:
    state = fold(b.node("b", 4), b.node("a", 4), b.lost("b"), b.node("b", 4), b.submitted("j", 1))
    assert placements_of(plan(state, NOW, DEFAULT_POLICY)) == {"j": [("b", [0])]}


def running(job_id: str, node: str, gpus: list[int]) -> list[Event]:
    """A batch job running on ``node`` for the last hour."""
    start = msgspec.structs.replace(b.started(job_id, node, gpus), meta=b.meta(NOW - HOUR))
    return [b.submitted(job_id, len(gpus), resumable=True), b.plan((job_id, node, gpus)), start]


@pytest.mark.parametrize(("first", "second"), [("b", "a"), ("a", "b")])
def test_of_two_alike_victims_on_two_nodes_the_one_on_the_node_registered_first_is_stopped(
    first: str, second: str
) -> None:
    state = fold(
        b.node(first, 2),
        b.node(second, 2),
        *running("x", second, [0, 1]),
        *running("y", first, [0, 1]),
        b.submitted("notebook", 2, tier="interactive", at=NOW),
    )
    decided = plan(state, NOW, DEFAULT_POLICY)
    assert [p.job_id for p in decided.preemptions] == ["y"]
    assert [(h.job_id, h.placements[0].node_id) for h in decided.holds] == [("notebook", first)]


@pytest.mark.parametrize(("first", "second"), [("y", "x"), ("x", "y")])
def test_of_two_alike_victims_on_one_node_the_one_submitted_last_is_stopped(
    first: str, second: str
) -> None:
    state = fold(
        b.node("n", 2),
        *running(first, "n", [0]),
        *running(second, "n", [1]),
        b.submitted("notebook", 1, tier="interactive", at=NOW),
    )
    decided = plan(state, NOW, DEFAULT_POLICY)
    assert [p.job_id for p in decided.preemptions] == [second]


# --- the property: a log renamed, planned, is the plan of the log, renamed ---------------
#
# A log is generated over abstract names (node 0, job 3, account segment 2...), then written
# twice with two random namings: accounts that tie in fair share (docs/adr/0031), nodes
# alike, drains, quotas.

Names = dict[str, list[str]]  # kind -> abstract index -> name


@dataclass
class Log:
    """A log over abstract names: ``events`` takes a naming and writes it."""

    programs: list[dict[str, Any]] = field(default_factory=list)
    teams: list[dict[str, Any]] = field(default_factory=list)  # each with its program
    nodes: list[dict[str, Any]] = field(default_factory=list)
    after_nodes: list[tuple[str, int]] = field(default_factory=list)  # (what, node)
    running: list[dict[str, Any]] = field(default_factory=list)
    pending: list[dict[str, Any]] = field(default_factory=list)

    def events(self, names: Names) -> list[Event]:
        ids = itertools.count()

        def meta(at: int) -> Meta:
            return Meta(id=f"e{next(ids)}", at=at, producer="test")

        def path(team: int) -> str:
            program = self.teams[team]["program"]
            return f"{names['account'][program]}/{names['account'][len(self.programs) + team]}"

        out: list[Event] = []
        for n, program in enumerate(self.programs):
            account = names["account"][n]
            out.append(AccountDefined(meta=meta(0), path=account, settings=program["settings"]))
            if program["budget"] is not None:
                out.append(
                    BudgetGranted(
                        meta=meta(0), path=account, gpu_ms=program["budget"], period_ns=1000 * HOUR,
                        starts_at=0,
                    )
                )  # fmt: skip
        for n, team in enumerate(self.teams):
            out.append(AccountDefined(meta=meta(0), path=path(n), settings=team["settings"]))
        for n, node in enumerate(self.nodes):
            out.append(_registered(meta(0), names["node"][n], node))
        for n, job in enumerate(self.running):
            job_id, account = names["job"][n], path(job["team"])
            spec = JobSpec(
                account=account, gpus=job["gpus"], workers=len(job["on"]), command=["x"],
                tier=job["tier"], resumable=job["resumable"], max_runtime_ns=job["runtime"],
            )  # fmt: skip
            started = NOW - job["ran"]
            out.append(JobSubmitted(meta=meta(started), job_id=job_id, spec=spec))
            placements = [Placement(node_id=names["node"][i], gpus=g) for i, g in job["on"]]
            out.append(
                PlanComputed(
                    meta=meta(started), basis_seq=0, now=started, policy="test", policy_hash="-",
                    code_version="-", admissions=[Admission(job_id=job_id, placements=placements)],
                )
            )  # fmt: skip
            for p in placements:
                out.append(
                    JobStarted(
                        meta=meta(started), job_id=job_id, node_id=p.node_id, gpus=p.gpus, pid=1,
                        output_path="-",
                    )
                )  # fmt: skip
            if job["charged"]:
                out.append(
                    UsageCharged(
                        meta=meta(started + HOUR // 2), path=account, job_id=job_id, attempt=0,
                        from_ns=started, to_ns=started + HOUR // 2, gpu_ms=job["charged"],
                    )
                )  # fmt: skip
        for what, n in self.after_nodes:
            node_id = names["node"][n]
            if what == "again":
                out.append(_registered(meta(NOW - HOUR), node_id, self.nodes[n]))
            elif what == "lost":
                out.append(NodeLost(meta=meta(NOW - HOUR), node_id=node_id, last_seen_ns=0,
                                    timeout_ns=1))  # fmt: skip
            else:
                drain = what == "drained"
                out.append(NodeCordoned(meta=meta(NOW - HOUR), node_id=node_id, drain=drain))
        for n, job in enumerate(self.pending):
            spec = JobSpec(
                account=path(job["team"]), gpus=job["gpus"], workers=job["workers"],
                command=["x"], tier=job["tier"], topology=job["topology"], flavor=job["flavor"],
                max_runtime_ns=job["runtime"], max_gpus=job["max_gpus"], resumable=True,
            )  # fmt: skip
            job_id = names["job"][len(self.running) + n]
            out.append(JobSubmitted(meta=meta(NOW - job["waited"]), job_id=job_id, spec=spec))
        return out

    def size(self, kind: str) -> int:
        return {
            "node": len(self.nodes),
            "job": len(self.running) + len(self.pending),
            "account": len(self.programs) + len(self.teams),
        }[kind]


def _registered(meta: Meta, node_id: str, node: dict[str, Any]) -> NodeRegistered:
    gpus = node["gpus"]
    halves = [list(range(gpus // 2)), list(range(gpus // 2, gpus))]
    return NodeRegistered(
        meta=meta,
        node_id=node_id,
        hostname="host",
        gpus=[GpuInfo(index=i, model=node["model"], memory_mib=1024) for i in range(gpus)],
        labels={"rack": node["rack"]},
        nvlink_islands=halves if node["halves"] else [list(range(gpus))],
    )


QUOTAS = st.sampled_from([None, None, None, 2, 4, 8, 16])


def _settings(weight: int, quota: int | None, borrow: int | None, lend: int | None) -> Any:
    if quota is None:
        return AccountSettings(weight=weight)
    return AccountSettings(
        weight=weight,
        quota={"gpu": quota},
        borrowing_limit={} if borrow is None else {"gpu": borrow},
        lending_limit={} if lend is None else {"gpu": min(lend, quota)},
    )


@st.composite
def logs(draw: st.DrawFn) -> Log:
    log = Log()
    # Accounts: weights of 1 or 2, so that siblings often tie in fair share.
    programs = draw(st.integers(1, 3))
    for weight in draw(st.lists(st.integers(1, 2), min_size=programs, max_size=programs)):
        settings = _settings(weight, draw(QUOTAS), draw(QUOTAS), draw(QUOTAS))
        budget = draw(st.sampled_from([None, None, 1, 10**12]))  # 1: used up at once
        log.programs.append({"settings": settings, "budget": budget})
    for program in range(programs):
        teams = draw(st.integers(1, 3))
        for weight in draw(st.lists(st.integers(1, 2), min_size=teams, max_size=teams)):
            settings = _settings(weight, draw(QUOTAS), draw(QUOTAS), None)
            log.teams.append({"program": program, "settings": settings})
    teams = len(log.teams)
    # Nodes, many of them alike: ties are what this is about.
    node = st.fixed_dictionaries(
        {
            "gpus": st.sampled_from([2, 4, 8]),
            "model": st.sampled_from(["A100", "H100"]),
            "rack": st.sampled_from(["r1", "r2"]),
            "halves": st.booleans(),
        }
    )
    log.nodes = draw(st.lists(node, min_size=1, max_size=6))
    free = [list(range(n["gpus"])) for n in log.nodes]
    # Running jobs: a block of a node, or a gang of two workers on two nodes.
    for _ in range(draw(st.integers(0, 8))):
        gpus = draw(st.sampled_from([1, 1, 2, 4]))
        on = draw(st.lists(st.integers(0, len(log.nodes) - 1), min_size=1, max_size=2,
                           unique=True))  # fmt: skip
        if any(len(free[i]) < gpus for i in on) or len({log.nodes[i]["model"] for i in on}) > 1:
            continue
        taken = []
        for i in on:
            taken.append((i, free[i][:gpus]))
            free[i] = free[i][gpus:]
        ran = draw(st.sampled_from([HOUR, HOUR, 2 * HOUR]))
        log.running.append(
            {
                "on": taken,
                "gpus": gpus,
                "team": draw(st.integers(0, teams - 1)),
                "tier": draw(st.sampled_from(["batch", "batch", "best-effort"])),
                "resumable": draw(st.booleans()),
                "ran": ran,
                "runtime": draw(st.sampled_from([None, ran + HOUR, ran + 2 * HOUR])),
                "charged": draw(st.sampled_from([0, 0, 1_000, 50_000, 2_000_000])),
            }
        )
    # Nodes back, lost, cordoned or drained after their jobs started.
    log.after_nodes = draw(
        st.lists(
            st.tuples(
                st.sampled_from(["again", "lost", "cordoned", "drained"]),
                st.integers(0, len(log.nodes) - 1),
            ),
            max_size=2,
            unique_by=lambda x: x[1],
        )
    )
    pending: st.SearchStrategy[dict[str, Any]] = st.fixed_dictionaries(
        {
            "gpus": st.sampled_from([1, 1, 2, 2, 4, 8]),
            "workers": st.sampled_from([1, 1, 2, 3]),
            "team": st.integers(0, teams - 1),
            "tier": st.sampled_from(["interactive", "batch", "batch", "best-effort"]),
            "topology": st.sampled_from(["any", "any", "node", "rack", "nvlink"]),
            "flavor": st.sampled_from([None, None, None, "A100", "H100"]),
            "runtime": st.sampled_from([None, HOUR, 3 * HOUR]),
            "max_gpus": st.sampled_from([None, None, 4]),
            "waited": st.sampled_from([0, HOUR, 3 * HOUR]),
        }
    )
    for job in draw(st.lists(pending, min_size=1, max_size=10)):
        if job["max_gpus"] is not None and (job["workers"] > 1 or job["max_gpus"] < job["gpus"]):
            job["max_gpus"] = None
        log.pending.append(job)
    return log


@st.composite
def namings(draw: st.DrawFn, log: Log) -> Names:
    """Names for every abstract one, in an order of their own: a permutation."""
    names = {}
    for kind, prefix in (("node", "n"), ("job", "j"), ("account", "a")):
        count = log.size(kind)
        names[kind] = [f"{prefix}{k:02d}" for k in draw(st.permutations(range(count)))]
    return names


def unnamed(decided: Plan, names: Names) -> dict[str, Any]:
    """The plan's decisions over abstract names; as mappings where a list only lists."""
    node = {name: n for n, name in enumerate(names["node"])}
    job = {name: n for n, name in enumerate(names["job"])}
    segment = {name: n for n, name in enumerate(names["account"])}

    def account(path: str) -> tuple[int, ...]:
        return tuple(segment[s] for s in path.split("/"))

    def placed(placements: list[Placement]) -> list[tuple[int, list[int]]]:
        return [(node[p.node_id], p.gpus) for p in placements]

    # The parameters that name a job, a node or an account
    renamers: dict[str, Callable[[Any], object]] = {
        "for": job.__getitem__, "job": job.__getitem__, "node": node.__getitem__,
        "account": account,
    }  # fmt: skip

    def params(given: dict[str, Any]) -> dict[str, Any]:
        return {k: renamers[k](v) if k in renamers else v for k, v in given.items()}

    reservation = decided.reservation
    return {
        "admissions": {job[a.job_id]: (placed(a.placements), a.funded) for a in decided.admissions},
        "pending": {job[r.job_id]: (r.code, params(r.params)) for r in decided.pending},
        "preemptions": {job[p.job_id]: (p.code, params(p.params)) for p in decided.preemptions},
        "holds": {job[h.job_id]: placed(h.placements) for h in decided.holds},
        "ranks": {
            account(r.account): msgspec.structs.replace(r, account="") for r in decided.ranks
        },
        "reservation": None
        if reservation is None
        else (
            job[reservation.job_id],
            reservation.starts_at,
            placed(reservation.placements),
            placed(reservation.set_aside),
        ),
    }


def planned_twice(events: list[Event], policy: Policy, kept: bool) -> tuple[State, list[Plan]]:
    """Two cycles: the first plan is recorded (its holds among it), then the next made;
    with a memo kept between them if ``kept``."""
    state = fold(*events)
    memo = PlanMemo(state) if kept else None
    first = plan(state, NOW, policy, memo)
    recorded = first.recorded(
        Meta(id="p", at=NOW, producer="test"), basis_seq=state.seq, now=NOW, policy=policy.name,
        policy_hash="-", code_version="-",
    )  # fmt: skip
    apply(state, state.seq + 1, recorded)
    return state, [first, plan(state, NOW + S, policy, memo)]


@pytest.mark.parametrize("policy", sorted(POLICIES))
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_a_renamed_log_is_planned_alike_renamed(policy: str, data: st.DataObject) -> None:
    log = data.draw(logs())
    names = [data.draw(namings(log)) for _ in range(2)]
    # One naming planned with a memo, the other without: a memo changes no plan either.
    folded = [
        planned_twice(log.events(n), POLICIES[policy], kept)
        for n, kept in zip(names, (False, True), strict=True)
    ]
    for (state, _), n in zip(folded, names, strict=True):
        assert [i.reason for i in state.ignored] == [], n
    for cycle in range(2):
        decided = [unnamed(plans[cycle], n) for (_, plans), n in zip(folded, names, strict=True)]
        assert decided[0] == decided[1], f"cycle {cycle + 1}"
