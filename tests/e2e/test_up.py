"""README command 1 as a user runs it: `allot up`, a submission from another process,
then Ctrl-C."""

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from allot.client import exitcodes


def test_allot_up_runs_a_job_and_stops_everything_on_ctrl_c(tmp_path: Path) -> None:
    env = {**os.environ, "ALLOT_HOME": str(tmp_path / "home")}
    env.pop("ALLOT_NATS_URL", None)
    allot = [sys.executable, "-m", "allot.client.cli"]
    up = subprocess.Popen(
        [*allot, "up", "--nodes", "1x2", "--data-dir", str(tmp_path / "data")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert up.stdout is not None
        banner = [up.stdout.readline() for _ in range(2)]
        assert banner[0].startswith("Allot is up: 1 simulated nodes, 2 GPUs"), banner

        # The CLI finds the running Allot by itself ($ALLOT_HOME/current.json).
        started = time.monotonic()
        done = subprocess.run(
            [*allot, "submit", "--gpus", "1", "--account", "demo", "--wait", "--",
             sys.executable, "-c", "print(42)"],
            env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "42"
        assert time.monotonic() - started < 10
        status = subprocess.run(
            [*allot, "status", "--json"], env=env, capture_output=True, text=True
        )
        assert '"status": "succeeded"' in status.stdout

        # A job still running when Allot is stopped is stopped with it.
        subprocess.run(
            [*allot, "submit", "--gpus", "1", "--account", "demo", "--", "sleep", "600"],
            env=env, check=True, capture_output=True, timeout=60,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while len(list(tmp_path.glob("data/nodes/*/jobs/*/*/pid"))) < 2:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        pid_files = sorted(tmp_path.glob("data/nodes/*/jobs/*/*/pid"))
        groups = [int(p.read_text()) for p in pid_files]
    finally:
        up.send_signal(signal.SIGINT)
        code = up.wait(timeout=60)
    assert code == 0
    assert not (tmp_path / "home" / "current.json").exists()
    for group in groups:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            continue
        raise AssertionError(f"process group {group} outlived allot up")
    leftovers = subprocess.run(
        ["pgrep", "-f", str(tmp_path / "data")], capture_output=True, text=True
    ).stdout.split()
    assert leftovers == []


@pytest.mark.slow
def test_allot_up_json_announces_where_it_runs(tmp_path: Path) -> None:
    env = {**os.environ, "ALLOT_HOME": str(tmp_path / "home")}
    up = subprocess.Popen(
        [sys.executable, "-m", "allot.client.cli", "up", "--json", "--demo", "--nodes", "2x4",
         "--data-dir", str(tmp_path / "data")],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert up.stdout is not None
        announced = json.loads(up.stdout.readline())
        assert announced["nodes"] == 2
        assert announced["gpus"] == 8
        assert announced["nats_url"].startswith("nats://127.0.0.1:")
        # The dashboard is up on this machine only, answering from the same log.
        dashboard = announced["dashboard_url"]
        assert dashboard.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(dashboard + "api/nodes", timeout=10) as answer:
            assert [n["node_id"] for n in json.load(answer)["data"]] == ["node-1", "node-2"]
        demo = [json.loads(up.stdout.readline()) for _ in range(7)]
        assert all(d["job_id"].startswith("j-") for d in demo)
        assert (demo[5]["demo"], demo[5]["gpus"]) == ("ddp-pretrain", "2x4 GPUs")
        # Then the preemption story: a notebook arrives, the training job is preempted,
        # requeued, resumes from its checkpoint and finishes.
        story = [json.loads(up.stdout.readline())["demo"] for _ in range(3)]
        assert story == ["notebook", "preempted", "ended"]
    finally:
        up.send_signal(signal.SIGINT)
        assert up.wait(timeout=60) == 0


def test_a_second_allot_up_on_the_same_data_or_home_is_refused_and_changes_nothing(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "ALLOT_HOME": str(tmp_path / "home")}
    env.pop("ALLOT_NATS_URL", None)
    small = ["up", "--insecure", "--nodes", "1x1", "--metrics-port", "0"]
    first = subprocess.Popen(
        [sys.executable, "-m", "allot.client.cli", *small, "--data-dir", str(tmp_path / "data")],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert first.stdout is not None
        assert first.stdout.readline().startswith("Allot is up")
        current = (tmp_path / "home" / "current.json").read_text()
        url = json.loads(current)["nats_url"]
        for data_dir, other_home in [("data", "home"), ("data", "home2"), ("data2", "home")]:
            second = subprocess.run(
                [sys.executable, "-m", "allot.client.cli", *small,
                 "--data-dir", str(tmp_path / data_dir)],
                env={**env, "ALLOT_HOME": str(tmp_path / other_home)},
                capture_output=True, text=True, timeout=60,
            )  # fmt: skip
            assert second.returncode == exitcodes.IN_USE, second.stderr
            assert "Traceback" not in second.stderr
            [line] = second.stderr.strip().splitlines()
            assert line.startswith("allot: another `allot up`"), line
            assert f"pid {first.pid}" in line, line
            assert url in line, line
            assert "--data-dir" in line, line
            assert "ALLOT_HOME" in line, line
            assert second.stdout == ""
        assert (tmp_path / "home" / "current.json").read_text() == current
        assert not (tmp_path / "home2" / "current.json").exists()
    finally:
        first.send_signal(signal.SIGINT)
        assert first.wait(timeout=60) == 0
