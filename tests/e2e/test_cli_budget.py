"""`allot budget grant` to an account that has run nothing yet shows in `allot budget show`."""

import asyncio
import json
import os
import subprocess
import sys

from allot.client.stack import Stack


async def test_a_grant_shows_before_the_account_runs_anything(stack: Stack) -> None:
    env = {**os.environ, "ALLOT_NATS_URL": stack.url, "ALLOT_IDENTITY": str(stack.operator)}

    def allot(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "allot.client.cli", *args],
                              env=env, capture_output=True, text=True, timeout=60)  # fmt: skip

    granted = await asyncio.to_thread(allot, "budget", "grant", "lab/new", "--gpu-hours", "5")
    assert granted.returncode == 0, granted.stderr
    shown = await asyncio.to_thread(allot, "budget", "show", "--json")
    assert shown.returncode == 0, shown.stderr
    [row] = [r for r in json.loads(shown.stdout) if r["account"] == "lab/new"]
    assert row["budget_gpu_hours"] == 5
    table = await asyncio.to_thread(allot, "budget", "show")
    assert "new" in table.stdout.split()
