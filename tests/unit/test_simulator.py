"""The simulator drives the real planner on a virtual clock: small traces checked by hand,
and properties of any run."""

import gc
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from allot.bus.codec import encode
from allot.bus.eventlog import make_record
from allot.core import DEFAULT_POLICY, plan
from allot.core.policies import POLICIES
from allot.core.policytoml import policy_toml
from allot.core.replay import verify
from allot.proto.events import AccountSettings
from allot.proto.subjects import subject_for
from allot.sim.simulator import Settings, Simulator, simulate
from allot.sim.trace import Fill, NodeOutage, TraceError, TraceJob, filled


def trace(*jobs: tuple[str, float, float, int, str], tier: str | None = None) -> list[TraceJob]:
    return filled(
        [
            TraceJob(job_id=j, submit_s=t, duration_s=d, gpus=g, account=a, tier=tier)
            for j, t, d, g, a in jobs
        ],
        Fill(),
    )


def test_a_job_waits_for_the_gpus_a_running_one_holds() -> None:
    jobs = trace(("a", 0, 100, 2, "x"), ("b", 10, 50, 1, "x"), tier="batch")
    outcomes, end = Simulator(jobs, Settings(nodes=1, gpus_per_node=2), DEFAULT_POLICY).run()
    by_id = {o.job_id: o for o in outcomes}
    assert by_id["a"].runs == [(0.0, 100.0)]
    assert by_id["b"].runs == [(100.0, 150.0)]
    assert end == 150.0


def test_an_interactive_job_preempts_a_resumable_batch_job_which_resumes() -> None:
    jobs = [
        TraceJob(job_id="train", submit_s=0, duration_s=1000, gpus=2, account="x", tier="batch",
                 resumable=True),
        TraceJob(job_id="debug", submit_s=100, duration_s=60, gpus=2, account="y",
                 tier="interactive"),
    ]  # fmt: skip
    sim = Settings(nodes=1, gpus_per_node=2, restart_overhead_s=60, stop_s=10)
    outcomes, end = Simulator(filled(jobs, Fill()), sim, DEFAULT_POLICY).run()
    train, debug = sorted(outcomes, key=lambda o: o.job_id, reverse=True)
    assert train.runs[0] == (0.0, 110.0)  # stopped at 100, saved and gone at 110
    assert debug.runs == [(110.0, 170.0)]
    # Resumed at 170 with 890 s of work left plus the restart overhead.
    assert train.runs[1] == (170.0, 170.0 + 900 + 60)
    assert (train.preemptions, train.lost_gpu_s) == (1, 2 * 60)
    assert end == train.runs[1][1]


def test_a_node_failure_costs_work_since_the_last_checkpoint_or_all_of_it() -> None:
    """Both nodes fail at 250 s and are back at 400 s. The resumable job checkpointed at
    100 and 200 s: it resumes from there once its node is back, paying the restart again.
    The other cannot resume: its 250 s of work are lost and it ends."""
    jobs = [
        TraceJob(job_id="ckpt", submit_s=0, duration_s=1000, gpus=1, account="x", tier="batch",
                 resumable=True, checkpoint_interval_s=100),
        TraceJob(job_id="plain", submit_s=0, duration_s=1000, gpus=1, account="x",
                 tier="batch", resumable=False),
    ]  # fmt: skip
    sim = Settings(nodes=2, gpus_per_node=1, restart_overhead_s=60)
    outages = [NodeOutage(node=n, down_s=250, up_s=400) for n in (0, 1)]
    outcomes, end = Simulator(filled(jobs, Fill()), sim, DEFAULT_POLICY, outages=outages).run()
    ckpt, plain = sorted(outcomes, key=lambda o: o.job_id)
    assert ckpt.runs == [(0.0, 250.0), (400.0, 400.0 + 800 + 60)]
    assert (ckpt.failures, ckpt.failure_lost_gpu_s, ckpt.preemptions) == (1, 50 + 60, 0)
    assert (plain.runs, plain.end_s, plain.failures, plain.failure_lost_gpu_s) == (
        [(0.0, 250.0)],
        250.0,
        1,
        250.0,
    )
    assert end == 1260.0
    metrics = simulate(filled(jobs, Fill()), sim, DEFAULT_POLICY, "allot", outages=outages)
    assert metrics["node_failures"] == 2
    assert metrics["lost_gpu_hours_to_failures"] == pytest.approx((110 + 250) / 3600)
    # ckpt waited 250..400 while both nodes were down: nothing was there to use.
    assert metrics["occupancy"] == pytest.approx(1.0)


def test_a_run_ends_when_the_jobs_left_can_never_start() -> None:
    """The only node fails for good at 10 s: the job that arrives at 20 s waits to the end,
    which is then, not never."""
    jobs = trace(("early", 0, 5, 1, "x"), ("late", 20, 5, 1, "x"), tier="batch")
    sim = Settings(nodes=1, gpus_per_node=1)
    outages = [NodeOutage(node=0, down_s=10)]
    outcomes, end = Simulator(jobs, sim, DEFAULT_POLICY, outages=outages).run()
    early, late = sorted(outcomes, key=lambda o: o.job_id)
    assert (early.runs, early.end_s) == ([(0.0, 5.0)], 5.0)
    assert (late.runs, late.first_start_s, late.end_s, end) == ([], None, None, 20.0)
    # An outage of another node still to come changes nothing: no node that is down comes
    # back, so the run ends as soon.
    two = Settings(nodes=2, gpus_per_node=1)
    gang = TraceJob(job_id="wide", submit_s=0, duration_s=5, gpus=1, workers=2, account="x")
    wide = filled([gang, *trace(("one", 20, 5, 1, "x"), tier="batch")], Fill())
    gone = [NodeOutage(node=0, down_s=0), NodeOutage(node=1, down_s=10_000, up_s=10_001)]
    outcomes, end = Simulator(wide, two, DEFAULT_POLICY, outages=gone).run()
    assert end == 25.0
    assert next(o for o in outcomes if o.job_id == "wide").runs == []


def test_lost_work_counts_a_restart_cut_short_once() -> None:
    """Failures at 250 s and, 50 s into its restart (overhead 60 s), at 450 s: the job's
    runs add up to 1160 s for 1000 s of work, so 160 s were lost, not 110 + 110."""
    jobs = [
        TraceJob(job_id="ckpt", submit_s=0, duration_s=1000, gpus=1, account="x", tier="batch",
                 resumable=True, checkpoint_interval_s=100),
    ]  # fmt: skip
    outages = [NodeOutage(node=0, down_s=250, up_s=400), NodeOutage(node=0, down_s=450, up_s=500)]
    sim = Settings(nodes=1, gpus_per_node=1, restart_overhead_s=60)
    [ckpt], _ = Simulator(filled(jobs, Fill()), sim, DEFAULT_POLICY, outages=outages).run()
    assert ckpt.runs == [(0.0, 250.0), (400.0, 450.0), (500.0, 1360.0)]
    assert sum(e - s for s, e in ckpt.runs) - 1000 == ckpt.failure_lost_gpu_s == 160


def test_a_job_that_ends_as_its_node_fails_has_ended() -> None:
    """Its end, and a save on SIGTERM, that fall due as the node fails come first."""
    jobs = [
        TraceJob(job_id="done", submit_s=0, duration_s=100, gpus=1, account="x", tier="batch",
                 resumable=False),
    ]  # fmt: skip
    sim = Settings(nodes=1, gpus_per_node=1)
    outages = [NodeOutage(node=0, down_s=100, up_s=200)]
    [done], _ = Simulator(filled(jobs, Fill()), sim, DEFAULT_POLICY, outages=outages).run()
    assert (done.runs, done.end_s, done.failures, done.failure_lost_gpu_s) == (
        [(0.0, 100.0)],
        100.0,
        0,
        0.0,
    )


def test_outages_that_do_not_fit_the_cluster_are_refused() -> None:
    jobs = trace(("a", 0, 10, 1, "x"))
    sim = Settings(nodes=1, gpus_per_node=1)
    with pytest.raises(TraceError, match="node=1 is not in a cluster of 1 nodes"):
        Simulator(jobs, sim, DEFAULT_POLICY, outages=[NodeOutage(node=1, down_s=5)])
    twice = [NodeOutage(node=0, down_s=5, up_s=20), NodeOutage(node=0, down_s=10, up_s=30)]
    with pytest.raises(TraceError, match="node 0 goes down at down_s=10 while still down"):
        Simulator(jobs, sim, DEFAULT_POLICY, outages=twice)


@pytest.mark.parametrize("resumable", [True, False])
def test_a_job_stopping_when_its_node_fails_ends_its_attempt_once(resumable: bool) -> None:
    """The notebook's victim is saving its checkpoint when the node fails: the failure,
    not the stop, ends the attempt. A resumable job runs again from its last checkpoint
    once the notebook is done; one that cannot resume has ended."""
    jobs = [
        TraceJob(job_id="train", submit_s=0, duration_s=1000, gpus=1, account="x", tier="batch",
                 resumable=resumable, checkpoint_interval_s=100),
        TraceJob(job_id="debug", submit_s=150, duration_s=60, gpus=1, account="y",
                 tier="interactive"),
    ]  # fmt: skip
    sim = Settings(nodes=1, gpus_per_node=1, restart_overhead_s=60, stop_s=10)
    outages = [NodeOutage(node=0, down_s=155, up_s=300)]
    outcomes, end = Simulator(filled(jobs, Fill()), sim, DEFAULT_POLICY, outages=outages).run()
    debug, train = sorted(outcomes, key=lambda o: o.job_id)
    assert debug.runs == [(300.0, 360.0)]
    assert (train.failures, train.preemptions) == (1, 0)
    if resumable:
        assert train.runs == [(0.0, 155.0), (360.0, 360.0 + 900 + 60)]
        assert end == 1320.0
    else:
        assert (train.runs, train.end_s, train.failure_lost_gpu_s) == ([(0.0, 155.0)], 155.0, 155)
        assert end == 360.0


Row = tuple[int, int, int, str]  # submitted (s), duration (s), GPUs, account


def rows(longest_s: int, most: int) -> st.SearchStrategy[list[Row]]:
    """Random traces: jobs submitted in the first 3,000 s, running up to ``longest_s``."""
    row = st.tuples(st.integers(0, 3000), st.integers(1, longest_s),
                    st.sampled_from([1, 2, 4, 8]), st.sampled_from(["a", "b", "c"]))  # fmt: skip
    return st.lists(row, min_size=1, max_size=most)


def jobs_of(drawn: list[Row]) -> list[TraceJob]:
    return trace(*[(f"j{n}", t, d, g, a) for n, (t, d, g, a) in enumerate(drawn)])


@settings(max_examples=25, deadline=None)
@given(rows(longest_s=4000, most=25))
def test_gpu_time_is_conserved_occupancy_at_most_one_and_runs_repeat(drawn: list[Row]) -> None:
    jobs = jobs_of(drawn)
    sim = Settings(nodes=2, gpus_per_node=8)
    first = simulate(jobs, sim, DEFAULT_POLICY, "allot")
    outcomes, _ = Simulator(jobs, sim, DEFAULT_POLICY).run()
    for o in outcomes:
        assert o.end_s is not None
        ran = sum(e - s for s, e in o.runs)
        job = next(j for j in jobs if j.job_id == o.job_id)
        if job.resumable or not o.preemptions:  # work done once, plus what restarts cost
            assert ran >= job.duration_s - 1e-6
    assert 0 <= first["occupancy"] <= 1
    again = simulate(jobs, sim, DEFAULT_POLICY, "allot")
    first.pop("sim_wall_s"), again.pop("sim_wall_s")
    assert json.dumps(first, sort_keys=True) == json.dumps(again, sort_keys=True)


class _MemoChecked(Simulator):
    """Plans every moment both with the memo kept across the run and afresh."""

    def _plan(self) -> None:
        assert plan(self.state, self.now, self.policy, self.memo) == plan(
            self.state, self.now, self.policy
        )
        super()._plan()


@settings(max_examples=100, deadline=None)
@given(rows(longest_s=30_000, most=30))
def test_the_plan_memo_never_changes_a_simulated_plan(drawn: list[Row]) -> None:
    """Runs whose jobs declare runtimes (so that reservations are made and kept between
    cycles while the running jobs stay the same) and outlast the time slice."""
    _MemoChecked(jobs_of(drawn), Settings(nodes=2, gpus_per_node=8), DEFAULT_POLICY).run()


def test_allot_sim_runs_a_canonical_trace(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text(
        "job_id,submit_s,duration_s,gpus,account\na,0,100,2,x\nb,10,50,1,x\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "allot.client.cli", "sim", "--trace", str(tmp_path / "t.csv"),
         "--cluster", "1x2", "--json", str(tmp_path / "m.json")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    metrics = json.loads((tmp_path / "m.json").read_text())
    assert (metrics["policy"], metrics["jobs"], metrics["gpus"]) == ("allot", 2, 2)
    assert metrics["wait_p90_s"] == 90
    assert "filled (seed 1)" in done.stderr
    bad = subprocess.run(
        [sys.executable, "-m", "allot.client.cli", "sim", "--trace", str(tmp_path / "t.csv"),
         "--policy", "lottery"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert bad.returncode == 2
    assert "lottery: not a named policy (allot, fifo, kueue, priority, slurm)" in bad.stderr


def test_allot_sim_compares_named_policies_with_policy_files(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text(
        "job_id,submit_s,duration_s,gpus,account\na,0,100,2,x\nb,10,50,1,x\n"
    )
    # The same settings as fifo under another name decide the same; a bad file stops all.
    fifo = policy_toml(POLICIES["fifo"]).replace('name = "fifo"', 'name = "mine"')
    (tmp_path / "mine.toml").write_text(fifo)
    (tmp_path / "bad.toml").write_text('name = "bad"\norder = "lottery"\n')

    def sim(compare: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "allot.client.cli", "sim", "--trace", str(tmp_path / "t.csv"),
             "--cluster", "1x2", "--compare", compare, "--json", str(tmp_path / "m.json")],
            capture_output=True, text=True, timeout=60, cwd=tmp_path,
        )  # fmt: skip

    done = sim("fifo,./mine.toml,allot")
    assert done.returncode == 0, done.stderr
    runs = json.loads((tmp_path / "m.json").read_text())
    assert [r["policy"] for r in runs] == ["fifo", "mine", "allot"]
    assert runs[0]["decisions"] == runs[1]["decisions"]
    bad = sim("allot,./bad.toml")
    assert bad.returncode == 2
    assert "./bad.toml: order='lottery': one of" in bad.stderr


def test_allot_sim_takes_node_failures_from_a_node_events_file(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("job_id,submit_s,duration_s,gpus,account\na,0,100,2,x\n")
    (tmp_path / "n.csv").write_text("node,down_s,up_s\n0,50,80\n")

    def sim(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "allot.client.cli", "sim", "--trace", str(tmp_path / "t.csv"),
             "--node-events", str(tmp_path / "n.csv"), *extra],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    done = sim("--cluster", "1x2", "--json", str(tmp_path / "m.json"))
    assert done.returncode == 0, done.stderr
    assert "1 node failures" in done.stderr
    metrics = json.loads((tmp_path / "m.json").read_text())
    # Not resumable: its 50 s on 2 GPUs are lost, and it ends.
    assert (metrics["node_failures"], metrics["lost_gpu_hours_to_failures"]) == (1, 100 / 3600)
    (tmp_path / "n.csv").write_text("node,down_s,up_s\n1,50,80\n")
    bad = sim("--cluster", "1x2", "--json", str(tmp_path / "bad.json"))
    assert bad.returncode == 2
    assert "node=1 is not in a cluster of 1 nodes" in bad.stderr
    assert not (tmp_path / "bad.json").exists()


def test_an_account_tree_sets_the_shares_each_account_is_owed() -> None:
    """One GPU; a and b each want it for an hour from 0. a's weight is 3, b's 1: in the
    first hour a is owed three quarters, b one; in the second, whoever still wants it."""
    jobs = trace(("A", 0, 3600, 1, "lab/a"), ("B", 0, 3600, 1, "lab/b"), tier="batch")
    tree = {
        "lab": AccountSettings(),
        "lab/a": AccountSettings(weight=3),
        "lab/b": AccountSettings(weight=1),
    }
    sim = Settings(nodes=1, gpus_per_node=1)
    runs = Simulator(jobs, sim, DEFAULT_POLICY, accounts=tree)
    outcomes, _ = runs.run()
    assert runs.shares() == {"lab": 1.0, "lab/a": 0.75, "lab/b": 0.25}
    first = min(outcomes, key=lambda o: o.first_start_s or 0).account
    owed = {
        account: m["owed_gpu_hours"]
        for account, m in simulate(jobs, sim, DEFAULT_POLICY, "allot", accounts=tree)[
            "per_account"
        ].items()
    }
    later = {"lab/a": 0.75, "lab/b": 0.25}
    later[{"lab/a": "lab/b", "lab/b": "lab/a"}[first]] += 1.0
    assert owed == pytest.approx(later)


def test_allot_sim_runs_under_an_account_file_and_refuses_a_bad_one(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("job_id,submit_s,duration_s,gpus,account\na,0,100,1,lab/a\n")

    def sim(accounts: str) -> subprocess.CompletedProcess[str]:
        (tmp_path / "accounts.toml").write_text(accounts)
        return subprocess.run(
            [sys.executable, "-m", "allot.client.cli", "sim", "--trace", str(tmp_path / "t.csv"),
             "--cluster", "1x1", "--accounts", str(tmp_path / "accounts.toml")],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    good = sim('[accounts."lab"]\n[accounts."lab/a"]\nweight = 2\n')
    assert good.returncode == 0, good.stderr
    bad = sim('[accounts."lab"]\n[accounts."lab/a"]\nweight = 0\n')
    assert bad.returncode == 2
    assert "accounts.lab/a.weight=0: a whole number from 1 to 1000000" in bad.stderr
    missing = sim('[accounts."lab"]\n[accounts."lab/b"]\n')
    assert missing.returncode == 2
    assert "the trace submits to accounts it does not declare: lab/a" in missing.stderr
    inner = sim('[accounts."lab"]\n[accounts."lab/a"]\n[accounts."lab/a/x"]\n')
    assert inner.returncode == 2
    assert "accounts it declares with accounts below: lab/a" in inner.stderr


def test_a_lender_reclaims_its_quota_under_kueue_and_allot_but_not_under_fifo() -> None:
    # Two accounts, one GPU of nominal quota each: x borrows y's, then y wants it back.
    jobs = [
        TraceJob(job_id="borrower", submit_s=0, duration_s=1000, gpus=2, account="x",
                 tier="batch", resumable=True),
        TraceJob(job_id="lender", submit_s=10, duration_s=100, gpus=1, account="y",
                 tier="batch"),
    ]  # fmt: skip
    sim = Settings(nodes=1, gpus_per_node=2)
    waits = {}
    for name in ("fifo", "kueue", "allot"):
        outcomes, _ = Simulator(filled(jobs, Fill()), sim, POLICIES[name]).run()
        lender = next(o for o in outcomes if o.job_id == "lender")
        waits[name] = lender.first_start_s - lender.submit_s  # type: ignore[operator]
    assert waits["fifo"] == 990  # until the borrower is done
    assert waits["kueue"] == waits["allot"] == 10  # the stop takes 10 s


def test_strict_fifo_lets_nothing_pass_and_slurm_backfills() -> None:
    jobs = trace(
        ("long", 10, 5000, 1, "x"), ("wide", 11, 100, 2, "x"), ("short", 12, 50, 1, "x"),
        tier="batch",
    )  # fmt: skip
    sim = Settings(nodes=1, gpus_per_node=2)
    start = {}
    for name in ("fifo", "slurm"):
        outcomes, _ = Simulator(jobs, sim, POLICIES[name]).run()
        start[name] = {o.job_id: o.first_start_s for o in outcomes}
    assert start["fifo"]["short"] == 5110  # behind "wide", which waits for "long"
    # Backfilled: by its declared runtime (an hour) it ends before "long" declared it would
    # (two hours), when "wide" is to start.
    assert start["slurm"]["short"] == 12


def test_the_simulators_decisions_are_the_planners_own_as_replay_verifies() -> None:
    """The same inputs give the same decisions: the log the simulator writes, replayed
    through the planner the services run, diverges nowhere, for every policy."""
    rows = [("a", 0, 500, 4, "x"), ("b", 5, 300, 8, "y"), ("c", 7, 60, 1, "y"),
            ("d", 9, 900, 2, "x"), ("e", 30, 40, 2, "z"), ("f", 31, 800, 8, "z")]  # fmt: skip
    jobs = filled(
        [TraceJob(job_id=j, submit_s=t, duration_s=d, gpus=g, account=a) for j, t, d, g, a in rows],
        Fill(resumable_share=0.5),
    )
    for name, policy in POLICIES.items():
        sim = Simulator(jobs, Settings(nodes=2, gpus_per_node=8), policy, record=True)
        sim.run()
        assert sim.events is not None
        records = [
            make_record(n, subject_for(e), encode(e), {}) for n, e in enumerate(sim.events, 1)
        ]
        result = verify(records, records, "sim")
        assert result.divergences == [], name
        assert result.plans > 3, name


def test_a_comparison_writes_an_html_report_with_its_plots(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text(
        "job_id,submit_s,duration_s,gpus,account,tier\n"
        "a,0,4000,2,x,batch\nb,10,50,1,y,interactive\nc,20,7000,2,y,batch\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "allot.client.cli", "sim", "--trace", str(tmp_path / "t.csv"),
         "--cluster", "1x2", "--compare", "fifo,allot", "--report", str(tmp_path / "report")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "report" / "report.html").read_text()
    for name in ("waits.png", "owed_delivered.png", "occupancy.png"):
        assert f'src="{name}"' in page
        assert (tmp_path / "report" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "fifo" in page
    assert "allot" in page
    assert "filled (seed 1)" in page


def test_progress_is_told_as_jobs_end() -> None:
    jobs = trace(*[(f"j{n}", n, 10, 1, "x") for n in range(50)], tier="batch")
    told: list[tuple[int, int]] = []
    Simulator(jobs, Settings(nodes=1, gpus_per_node=2), DEFAULT_POLICY).run(
        lambda ended, total: told.append((ended, total))
    )
    assert told
    assert all(total == 50 for _, total in told)
    assert [ended for ended, _ in told] == sorted({ended for ended, _ in told})


def test_a_job_that_could_never_fit_is_refused_and_the_run_still_ends() -> None:
    jobs = trace(("big", 0, 100, 12, "x"), ("ok", 5, 10, 1, "x"), tier="batch")
    simulator = Simulator(jobs, Settings(nodes=2, gpus_per_node=8), DEFAULT_POLICY)
    outcomes, end = simulator.run()
    assert [o.job_id for o in outcomes] == ["ok"]
    assert end == 15.0
    assert "no node has that many GPUs" in simulator.refused["big"]
    result = simulate(jobs, Settings(nodes=2, gpus_per_node=8), DEFAULT_POLICY, "allot")
    assert (result["jobs"], result["refused"]) == (1, 1)


def test_a_run_leaves_no_garbage_for_the_collector() -> None:
    # The planner's memo and its fair-share ranking hold no reference cycles, so a run's
    # state goes when the run does, not whenever the collector next gets to it (during
    # the next policy of a comparison, or a planner's next cycles).
    jobs = trace(
        *((f"j{n}", n * 30.0, 600.0, 1 + n % 3, f"a{n % 4}") for n in range(60)),
        tier="batch",
    )
    gc.collect()
    gc.disable()
    try:
        simulate(jobs, Settings(nodes=2, gpus_per_node=4), DEFAULT_POLICY, "allot")
        assert gc.collect() == 0
    finally:
        gc.enable()


def test_the_decisions_digest_names_what_happened_to_every_job() -> None:
    """Two runs decide alike exactly when their digests are equal: a refactoring that must
    not change a decision is checked by it, on whole traces."""
    sim = Settings(nodes=1, gpus_per_node=8)
    jobs = jobs_of([(0.0, 100.0, 8, "a"), (10.0, 50.0, 4, "b"), (20.0, 30.0, 4, "a")])
    first = simulate(jobs, sim, DEFAULT_POLICY, "allot")
    assert simulate(jobs, sim, DEFAULT_POLICY, "allot")["decisions"] == first["decisions"]
    later = jobs_of([(0.0, 100.0, 8, "a"), (10.0, 50.0, 4, "b"), (21.0, 30.0, 4, "a")])
    assert simulate(later, sim, DEFAULT_POLICY, "allot")["decisions"] != first["decisions"]
    assert len(first["decisions"]) == 64  # SHA-256, in hex
