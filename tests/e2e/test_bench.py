import json
import subprocess
import sys


def test_the_benchmark_runs_and_reports_its_figures() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "allot.client.cli",
            "bench",
            "--jobs",
            "5",
            "--burst",
            "50",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    latency, intake = report["submit_to_start_ms"], report["intake"]
    assert latency["jobs"] == 5
    assert 0 < latency["p50"] <= latency["p99"] <= latency["max"]
    assert intake["submissions"] == 50
    assert intake["per_second"] > 0
    assert intake["plans"] >= 1
