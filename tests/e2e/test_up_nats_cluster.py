"""`allot up --nats-cluster 3`: three nats-servers, every command finds them all, and a user
added later is admitted by each of them."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ALLOT = [sys.executable, "-m", "allot.client.cli"]


@pytest.mark.slow
def test_allot_up_on_a_nats_cluster_runs_jobs_and_admits_a_user_on_every_member(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "ALLOT_HOME": str(tmp_path / "home")}
    env.pop("ALLOT_NATS_URL", None)
    env.pop("ALLOT_IDENTITY", None)
    up = subprocess.Popen(
        [*ALLOT, "up", "--nats-cluster", "3", "--nodes", "1x2", "--json",
         "--metrics-port", "0", "--dashboard-port", "0", "--data-dir", str(tmp_path / "data")],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert up.stdout is not None
        announced = json.loads(up.stdout.readline())
        servers = announced["nats_url"].split(",")
        assert len(servers) == 3

        def allot(*args: str, **more: str) -> "subprocess.CompletedProcess[str]":
            return subprocess.run(
                [*ALLOT, *args], env={**env, **more}, capture_output=True, text=True, timeout=60
            )

        done = allot("submit", "--gpus", "1", "--account", "demo", "--wait", "--",
                     sys.executable, "-c", "print(42)")  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "42"

        added = allot("users", "add", "bob", "--json")
        assert added.returncode == 0, added.stderr
        bob = json.loads(added.stdout)["identity"]
        for server in servers:  # each member admits him, whichever he reaches
            read = allot("log", "tail", "--json", ALLOT_NATS_URL=server, ALLOT_IDENTITY=bob)
            assert read.returncode == 0, read.stderr
            assert "JobSubmitted" in read.stdout
    finally:
        up.send_signal(signal.SIGINT)
        code = up.wait(timeout=60)
    assert code == 0
