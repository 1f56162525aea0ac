"""The lock an `allot up` holds on its data directory and ALLOT_HOME: held while the process
lives, gone with it however it ends (an OS lock, no stale file to clean up)."""

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from allot.client.uplock import Held, holding

HOLD = """
import sys, time
from pathlib import Path
from allot.client.uplock import holding
with holding(Path(sys.argv[1]), {"nats_url": "nats://127.0.0.1:4999"}):
    print("held", flush=True)
    time.sleep(600)
"""


def test_a_lock_is_held_while_its_process_lives_and_freed_when_it_is_killed(
    tmp_path: Path,
) -> None:
    lock = tmp_path / "data" / "up.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(lock)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "held\n"
        with pytest.raises(Held) as held, holding(lock, {}):
            pass
        assert held.value.owner == {"pid": holder.pid, "nats_url": "nats://127.0.0.1:4999"}
    finally:
        holder.send_signal(signal.SIGKILL)  # no chance to clean anything up
        holder.wait(timeout=10)
    with holding(lock, {"nats_url": "nats://here"}):
        assert json.loads(lock.read_text())["nats_url"] == "nats://here"
