"""`allot submit --wait --timeout N` when the job outlasts N: one line, its own exit code."""

import asyncio
import os
import subprocess
import sys

from allot.client import exitcodes
from allot.client.stack import Stack


async def test_a_wait_that_times_out_says_where_the_job_is(stack: Stack) -> None:
    env = {**os.environ, "ALLOT_NATS_URL": stack.url, "ALLOT_IDENTITY": str(stack.operator)}
    argv = [sys.executable, "-m", "allot.client.cli", "submit", "--gpus", "1",
            "--account", "demo", "--wait", "--timeout", "2", "--", "sleep", "60"]  # fmt: skip
    done = await asyncio.to_thread(
        subprocess.run, argv, env=env, capture_output=True, text=True, timeout=60
    )
    assert "Traceback" not in done.stderr, done.stderr
    job_id, line = done.stderr.strip().splitlines()
    assert job_id.startswith("j-")
    assert line.startswith(f"allot: {job_id} still "), line
    assert "after 2s" in line, line
    assert f"allot status {job_id}" in line, line
    assert done.returncode == exitcodes.WAIT_TIMED_OUT
