"""The Ai2 model in the simulator: budgets granted from the accounts file, funded work
protected for its minimum runtime, the fill that declares minimum runtimes, and the
metrics that say whether the budgets kept their promise."""

import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from allot.bus.codec import encode
from allot.bus.eventlog import make_record
from allot.core import DEFAULT_POLICY
from allot.core.replay import verify
from allot.proto.commands import BudgetGrantRequest
from allot.proto.events import AccountSettings, BudgetExhausted, BudgetGranted
from allot.proto.subjects import subject_for
from allot.sim.cli import SHOWN, _accounts, table
from allot.sim.metrics import JobOutcome, compute, decisions_digest
from allot.sim.simulator import Settings, Simulator
from allot.sim.trace import Fill, TraceError, TraceJob, filled

H = 3600.0
TREE = {"lab": AccountSettings(), "lab/free": AccountSettings(), "lab/paid": AccountSettings()}
PAID = [BudgetGrantRequest(account="lab/paid", gpu_hours=100, period="7d")]
Runs = list[tuple[float, float]]
PINNED_RESUMABLE = "---rrr--rr-r-rr-r--rrr-r"  # seed 1, before minimum runtimes were filled


def contended() -> list[TraceJob]:
    """Two GPUs. An unfunded job holds them; a job of the account with a budget comes at
    100; an interactive job, which outranks batch work, at 300."""
    return filled(
        [
            TraceJob(job_id="idle", submit_s=0, duration_s=10_000, gpus=2, account="lab/free",
                     tier="batch", resumable=True, min_runtime_s=H),
            TraceJob(job_id="paid", submit_s=100, duration_s=5000, gpus=2, account="lab/paid",
                     tier="batch", resumable=True, min_runtime_s=H),
            TraceJob(job_id="debug", submit_s=300, duration_s=60, gpus=2, account="lab/free",
                     tier="interactive", min_runtime_s=60),
        ],
        Fill(),
    )  # fmt: skip


def run(jobs: list[TraceJob], budgets: list[BudgetGrantRequest]) -> dict[str, JobOutcome]:
    sim = Simulator(jobs, Settings(nodes=1, gpus_per_node=2), DEFAULT_POLICY, accounts=TREE,
                    budgets=budgets)  # fmt: skip
    outcomes, _ = sim.run()
    return {o.job_id: o for o in outcomes}


def test_funded_work_stops_unfunded_work_and_is_protected_for_its_minimum_runtime() -> None:
    funded = run(contended(), PAID)
    idle, paid, debug = funded["idle"], funded["paid"], funded["debug"]
    assert idle.runs[0] == (0.0, 110.0)  # stopped for the funded job at once (10 s to stop)
    assert paid.runs[0][0] == 110.0
    assert paid.funded_runs[0] == paid.runs[0]
    assert idle.funded_runs == debug.funded_runs == []  # no budget on their path
    # The interactive job outranks it, but waits out its minimum runtime, and stops it the
    # moment that is over.
    assert debug.first_start_s == 110.0 + H + 10
    assert sum(o.funded_stops_inside_min_runtime for o in funded.values()) == 0

    # Without the budget nothing is funded: the job waits behind the unfunded one, and the
    # interactive job does not wait.
    unfunded = run(contended(), [])
    assert unfunded["idle"].runs[0] == (0.0, 310.0)  # stopped for the interactive job only
    assert unfunded["debug"].first_start_s == 310.0
    assert all(o.funded_runs == [] for o in unfunded.values())


class _StopsFundedWork(Simulator):
    """A planner that stops the funded job 500 s into its hour of protection."""

    def _plan(self) -> None:
        super()._plan()
        record = self.state.jobs.get("paid")
        if record is not None and record.started_at == 110 * 10**9 and self.now == 610 * 10**9:
            self._stop("paid", "BROKEN")


def test_a_stop_of_funded_work_inside_its_minimum_runtime_is_counted() -> None:
    jobs = [*contended(), *filled([TraceJob(job_id="tick", submit_s=610, duration_s=1,
                                            gpus=1, account="lab/free")], Fill())]  # fmt: skip
    sim = _StopsFundedWork(jobs, Settings(nodes=1, gpus_per_node=2), DEFAULT_POLICY,
                           accounts=TREE, budgets=PAID)  # fmt: skip
    outcomes, end = sim.run()
    by_id = {o.job_id: o for o in outcomes}
    assert by_id["paid"].funded_stops_inside_min_runtime == 1
    metrics = compute("broken", outcomes, 2, end, budgets=sim.budget_rates())
    assert metrics["funded_stops_inside_min_runtime"] == 1


def test_budget_metrics_by_hand() -> None:
    """Two hours. org/a's budget is 1 GPU, org/c's half of one, org's 2 (GPU-hours per
    hour); b has none."""

    def job(i: str, account: str, gpus: int, submit: float, runs: Runs, funded: Runs) -> JobOutcome:
        return JobOutcome(
            job_id=i, account=account, tier="batch", gpus=gpus, submit_s=submit,
            first_start_s=runs[0][0], end_s=2 * H, runs=runs, funded_runs=funded,
        )  # fmt: skip

    outcomes = [
        job("A1", "org/a", 2, 0, [(0, H)], [(0, H)]),  # wants 2 GPUs in hour 0
        job("A2", "org/a", 1, H, [(1.5 * H, 2 * H)], []),  # 1 GPU in hour 1, half unfunded
        job("B1", "b", 1, 0, [(0, 2 * H)], []),
        job("C1", "org/c", 1, 0, [(1.5 * H, 2 * H)], []),  # wants 1 GPU both hours
    ]
    outcomes[0] = msgspec.structs.replace(outcomes[0], end_s=H)
    budgets = {"org/a": H, "org/c": H / 2, "org": 2 * H}
    m = compute("test", outcomes, gpus=4, end_s=2 * H, budgets=budgets)
    per = m["per_budget"]
    # org/a: owed min(1, 2) + min(1, 1) = 2; it ran 2 funded and 0.5 unfunded.
    assert per["org/a"] == pytest.approx(
        {"owed_gpu_hours": 2, "delivered_gpu_hours": 2.5, "funded_gpu_hours": 2,
         "owed_delivered": 1.25}
    )  # fmt: skip
    assert per["org/c"]["owed_gpu_hours"] == pytest.approx(1)  # half a GPU each hour
    assert per["org/c"]["owed_delivered"] == pytest.approx(0.5)
    # org covers both: min(2, 3) + min(2, 2) owed, 3 delivered.
    assert per["org"]["owed_delivered"] == pytest.approx(0.75)
    # org/a's surplus hides nothing: capped at what it was owed.
    assert m["budget_owed_delivered_overall"] == pytest.approx((2 + 0.5 + 3) / (2 + 1 + 4))
    assert (m["budget_owed_delivered_min"], m["budget_least_served"]) == (0.5, "org/c")
    assert m["unfunded_share"] == pytest.approx((5 - 2) / 5)
    assert m["funded_stops_inside_min_runtime"] == 0
    assert "per_budget" not in compute("test", outcomes, gpus=4, end_s=2 * H)


def test_the_decisions_digest_of_a_run_without_budgets_is_what_it_always_was() -> None:
    outcome = JobOutcome(job_id="a", account="x", tier="batch", gpus=2, submit_s=0.0,
                         first_start_s=5.0, end_s=65.0, runs=[(5.0, 65.0)])  # fmt: skip
    # As computed before funded runs were recorded.
    before = "8065bdc07af754a3f7340d7f8ebb36c38e3f635630aa08b99e8db4fa1aee3fa7"
    assert decisions_digest([outcome]) == before
    funded = msgspec.structs.replace(outcome, funded_runs=[(5.0, 65.0)])
    assert decisions_digest([funded]) != before


def test_a_budget_is_granted_after_the_nodes_and_announced_used_up_once() -> None:
    """A 1 GPU-hour budget; a 2-GPU job runs two hours: the hourly charge uses it up. The
    log the run writes replays to the same decisions."""
    jobs = filled([TraceJob(job_id="big", submit_s=0, duration_s=2 * H, gpus=2,
                            account="lab/paid", min_runtime_s=60)], Fill())  # fmt: skip
    tight = [BudgetGrantRequest(account="lab/paid", gpu_hours=1, period="1d")]
    sim = Simulator(jobs, Settings(nodes=1, gpus_per_node=2), DEFAULT_POLICY, accounts=TREE,
                    budgets=tight, record=True)  # fmt: skip
    sim.run()
    assert sim.events is not None
    kinds = [type(e).__name__ for e in sim.events]
    assert kinds.index("BudgetGranted") > max(
        n for n, kind in enumerate(kinds) if kind == "NodeRegistered"
    )
    granted = next(e for e in sim.events if isinstance(e, BudgetGranted))
    assert (granted.gpu_ms, granted.period_ns, granted.starts_at) == (3_600_000, 86400 * 10**9, 0)
    used_up = [e for e in sim.events if isinstance(e, BudgetExhausted)]
    assert [(e.meta.at, e.period, e.used_gpu_ms) for e in used_up] == [
        (int(H) * 10**9, 0, 7_200_000)
    ]
    records = [make_record(n, subject_for(e), encode(e), {}) for n, e in enumerate(sim.events, 1)]
    assert verify(records, records, "sim").divergences == []


def test_a_share_is_of_the_cluster_the_nodes_make() -> None:
    share = [BudgetGrantRequest(account="lab/paid", share=0.25, period="7d")]
    sim = Simulator([], Settings(nodes=2, gpus_per_node=8), DEFAULT_POLICY, accounts=TREE,
                    budgets=share)  # fmt: skip
    assert sim.budget_rates() == {"lab/paid": pytest.approx(4 * H)}  # 4 of the 16 GPUs


@pytest.mark.parametrize(
    ("budgets", "expected"),
    [
        ('[budgets."lab/paid"]\nshare = 1.5\n',
         "budgets.lab/paid.share=1.5: a fraction of the cluster's GPU time, above 0 and at most 1"),
        ('[budgets."lab/paid"]\nshare = 0.5\ngpu_hours = 10\n',
         "budgets.lab/paid.gpu_hours=10.0: give either gpu_hours or share, not both"),
        ('[budgets."lab/paid"]\nperiod = "7d"\n',
         "budgets.lab/paid.gpu_hours=None: give either gpu_hours or share, not both"),
        ('[budgets."lab/nobody"]\nshare = 0.5\n',
         "budgets.lab/nobody: not an account of this file's [accounts] tables"),
        ('[budgets."lab/paid"]\nshare = 0.5\nperiod = "7x"\n',
         "budgets.lab/paid.period=7x: '7x' is not a duration"),
        ('[budgets."lab/paid"]\nshares = 0.5\n',
         "budgets.lab/paid: Object contains unknown field `shares`"),
        ('[budgets."lab/paid"]\nshare = "half"\n',
         "budgets.lab/paid: Expected `float | null`, got `str` - at `share`"),
        ('[budgets."lab/paid"]\nshare = 0.5\naccount = "lab/free"\n',
         "budgets.lab/paid.account: the table's name is the account"),
        ("budgets = 3\n", 'budgets: expected [budgets."PATH"] tables'),
        ('[budgets]\n"lab/paid" = 0.5\n', "budgets.lab/paid: expected a table"),
    ],
)  # fmt: skip
def test_a_bad_budget_is_refused_naming_the_file_field_and_value(
    tmp_path: Path, budgets: str, expected: str
) -> None:
    path = tmp_path / "accounts.toml"
    path.write_text(budgets + '[accounts."lab"]\n[accounts."lab/free"]\n[accounts."lab/paid"]\n')
    jobs = filled([TraceJob(job_id="a", submit_s=0, duration_s=1, gpus=1, account="lab/free")],
                  Fill())  # fmt: skip
    with pytest.raises(TraceError) as refused:
        _accounts(str(path), jobs, Settings(nodes=1, gpus_per_node=8))
    assert str(refused.value).startswith(f"--accounts {path}: ")
    assert expected in str(refused.value)


def test_allot_sim_shows_the_budget_metrics_only_with_budgets(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text(
        "job_id,submit_s,duration_s,gpus,account\na,0,100,1,lab/paid\nb,10,50,1,lab/free\n"
    )
    tree = '[accounts."lab"]\n[accounts."lab/free"]\n[accounts."lab/paid"]\n'

    def sim(budgets: str) -> subprocess.CompletedProcess[str]:
        (tmp_path / "a.toml").write_text(tree + budgets)
        return subprocess.run(
            [sys.executable, "-m", "allot.client.cli", "sim", "--trace", str(tmp_path / "t.csv"),
             "--cluster", "1x1", "--accounts", str(tmp_path / "a.toml"), "--fill", "ai2"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    funded = sim('[budgets."lab/paid"]\nshare = 0.5\n')
    assert funded.returncode == 0, funded.stderr
    assert "funded_stops_inside_min_runtime  0" in funded.stdout
    assert "min_runtime = max_runtime capped at 8 h" in funded.stderr
    plain = sim("")
    assert plain.returncode == 0, plain.stderr
    assert "budget_owed_delivered" not in plain.stdout
    assert "budget_owed_delivered_overall" not in table([{"policy": "p", "jobs": 0, "gpus": 1,
                                                          **dict.fromkeys(SHOWN, 0.0),
                                                          "decisions": "0" * 16}])  # fmt: skip


def test_allot_sim_refuses_a_bad_budget_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("job_id,submit_s,duration_s,gpus,account\na,0,100,1,lab/a\n")
    (tmp_path / "a.toml").write_text(
        '[accounts."lab"]\n[accounts."lab/a"]\n[budgets."lab/a"]\nshare = -1\n'
    )
    bad = subprocess.run(
        [sys.executable, "-m", "allot.client.cli", "sim", "--trace", str(tmp_path / "t.csv"),
         "--cluster", "1x1", "--accounts", str(tmp_path / "a.toml")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert bad.returncode == 2
    assert bad.stderr.count("\n") == 1  # one line, no traceback
    assert "budgets.lab/a.share=-1.0: a fraction of the cluster's GPU time" in bad.stderr


def trace_of(n: int) -> list[TraceJob]:
    return [
        TraceJob(job_id=f"j{i:03d}", submit_s=i * 7.0, duration_s=600.0 + 977.0 * (i % 41),
                 gpus=1 + i % 8, account=f"a{i % 3}")
        for i in range(n)
    ]  # fmt: skip


def test_the_ai2_fill_declares_seeded_minimum_runtimes_and_changes_nothing_else() -> None:
    plain = filled(trace_of(200), Fill(seed=3))
    ai2 = filled(trace_of(200), Fill(seed=3, min_runtimes=True))
    assert ai2 == filled(trace_of(200), Fill(seed=3, min_runtimes=True))  # the same, seeded
    assert ai2 != filled(trace_of(200), Fill(seed=4, min_runtimes=True))
    assert all(job.min_runtime_s == 0 for job in plain)
    assert [msgspec.structs.replace(j, min_runtime_s=0.0) for j in ai2] == plain
    for job in ai2:
        least, most = H, min(8 * H, job.max_runtime_s or 0)
        assert job.min_runtime_s in [n * H for n in range(1, 9)]
        assert least <= job.min_runtime_s <= most
        if not job.resumable:  # it would lose all its work: it asks for all of it
            assert job.min_runtime_s == most
    drawn = {j.min_runtime_s for j in ai2 if j.resumable and (j.max_runtime_s or 0) >= 8 * H}
    assert drawn == {n * H for n in range(1, 9)}
    own = filled([msgspec.structs.replace(trace_of(1)[0], min_runtime_s=120.0)],
                 Fill(min_runtimes=True))  # fmt: skip
    assert own[0].min_runtime_s == 120.0  # a trace's own is kept


def test_the_default_fill_is_what_it_always_was() -> None:
    """Seed 1's resumable batch jobs, as drawn before minimum runtimes could be filled."""
    jobs = filled(trace_of(24), Fill())
    assert "".join("r" if j.resumable else "-" for j in jobs) == PINNED_RESUMABLE
