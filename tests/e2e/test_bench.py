import json
import subprocess
import sys


def run(*args: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-m", "allot.client.cli", *args, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, object] = json.loads(done.stdout)
    return report


def test_the_stack_benchmark_runs_and_reports_its_figures() -> None:
    report = run("bench", "stack", "--jobs", "5", "--burst", "50", "--cli-runs", "3",
                 "--array-tasks", "40")  # fmt: skip
    latency, cli, intake = report["submit_to_start_ms"], report["cli_submit_ms"], report["intake"]
    assert isinstance(latency, dict)
    assert isinstance(cli, dict)
    assert isinstance(intake, dict)
    assert cli["runs"] == 3
    assert 0 < cli["p50"] <= cli["p90"]
    assert latency["jobs"] == 5
    assert 0 < latency["p50"] <= latency["p99"] <= latency["max"]
    assert intake["submissions"] == 50
    assert intake["per_second"] > 0
    assert intake["plans"] >= 1
    first, wait = report["submit_to_first_instruction_ms"], report["cli_submit_wait_ms"]
    array = report["array"]
    assert isinstance(first, dict)
    assert isinstance(wait, dict)
    assert isinstance(array, dict)
    assert 0 < first["p50"] <= first["p99"]
    assert wait["runs"] == 3
    assert array["tasks"] == 40
    assert 0 < array["acknowledged_ms"] <= array["shown_ms"]


def test_the_ledger_benchmark_is_reproducible_from_its_seed() -> None:
    first = run("bench", "ledger", "--events", "5000", "--seed", "3", "--repeat", "1")
    again = run("bench", "ledger", "--events", "5000", "--seed", "3", "--repeat", "1")
    assert first["events"] == again["events"] == 5000
    assert (first["jobs"], first["accounts"]) == (again["jobs"], again["accounts"])
    assert isinstance(first["fold_events_per_s"], float)
    assert first["fold_events_per_s"] > 0


def test_the_planner_benchmark_is_reproducible_from_its_seed() -> None:
    args = ("bench", "planner", "--nodes", "40", "--pending", "100,400", "--repeat", "2")
    first, again = run(*args, "--seed", "5"), run(*args, "--seed", "5")
    other = run(*args, "--seed", "6")

    def decided(report: dict[str, object]) -> list[tuple[object, ...]]:
        runs = report["runs"]
        assert isinstance(runs, list)
        return [(r["pending"], r["admitted"], r["reasons"], r["reservation"]) for r in runs]

    assert decided(first) == decided(again)
    assert decided(first) != decided(other)
    assert [r["pending"] for r in first["runs"]] == [100, 400]  # type: ignore[attr-defined]
    for r in first["runs"]:  # type: ignore[attr-defined]
        assert 0 < r["cycle_ms_p50"] <= r["cycle_ms_p99"]
        assert sum(r["reasons"].values()) + r["admitted"] == r["pending"]
    assert first["gpus"] == 320


def test_the_replay_benchmark_verifies_its_seeded_history() -> None:
    first = run("bench", "replay", "--events", "3000", "--seed", "2")
    again = run("bench", "replay", "--events", "3000", "--seed", "2")
    assert first["divergences"] == 0
    assert first["warnings"] == []
    assert (first["events"], first["plans"]) == (again["events"], again["plans"])
    assert isinstance(first["plans"], int)
    assert first["plans"] > 10
    assert isinstance(first["events"], int)
    assert first["events"] >= 3000


def test_the_snapshot_benchmark_restarts_the_planner_from_its_snapshot() -> None:
    first = run("bench", "snapshot", "--events", "3000", "--seed", "2", "--tail", "50")
    again = run("bench", "snapshot", "--events", "3000", "--seed", "2", "--tail", "50")
    without, with_ = first["without_snapshot"], first["with_snapshot"]
    assert isinstance(without, dict)
    assert isinstance(with_, dict)
    snapshot = first["snapshot"]
    assert isinstance(snapshot, dict)
    assert without["from_seq"] == 1
    assert without["stored_seq"] == snapshot["seq"] >= 3000
    assert with_["from_seq"] == snapshot["seq"] + 1  # only the tail is folded
    assert with_["at_seq"] >= snapshot["seq"] + 50  # and the tail folded
    assert with_["folded"] >= 50
    assert without["caught_up_s"] > 0
    assert with_["caught_up_s"] > 0
    again_snapshot = again["snapshot"]
    assert isinstance(again_snapshot, dict)
    assert (first["events"], snapshot["seq"]) == (again["events"], again_snapshot["seq"])
