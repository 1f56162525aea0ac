"""What a command line that only submits a job loads: its one-shot connection and the wire
contract; never asyncio or nats-py (they were most of its time), the planner, the fold, the
simulator, the services, a plotting library, or OpenTelemetry where no OTEL_* variable asks
for spans. Each of them costs start-up time on every `allot submit` a CI pipeline makes."""

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from allot.bus import EmbeddedNats
from allot.services.intake.app import Intake

# Module prefixes the submit path must not import.
NOT_FOR_SUBMIT = (
    "asyncio",
    "nats",
    "allot.client.client",
    "allot.bus.eventlog",
    "allot.core.planning",
    "allot.core.fold",
    "allot.sim",
    "allot.services",
    "allot.bus.server",
    "matplotlib",
    "numpy",
    "opentelemetry",
    "rich",
    "tomllib",
    "allot.client.readers",
    "allot.client.deploy",
    "allot.client.kubernetes",
)


def imported(stderr: str) -> set[str]:
    """The modules a process loaded, from what ``python -X importtime`` wrote."""
    return {
        line.rsplit("|", 1)[1].strip()
        for line in stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }


async def test_allot_submit_loads_no_planner_simulator_or_plotting(
    tmp_path: Path, nats_server: EmbeddedNats, intake: Intake
) -> None:
    env = {**os.environ, "ALLOT_HOME": str(tmp_path / "home")}
    for name in ("ALLOT_NATS_URL", "ALLOT_IDENTITY", "ALLOT_TLS_CA"):
        env.pop(name, None)
    for name in [name for name in env if name.startswith("OTEL_")]:
        env.pop(name)
    command = [sys.executable, "-X", "importtime", "-m", "allot.client.cli", "submit",
               "--gpus", "1", "--account", "ml/vision", "--nats-url", nats_server.url,
               "--", "true"]  # fmt: skip
    done = await asyncio.to_thread(
        subprocess.run, command, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip(), "no job id printed"
    loaded = imported(done.stderr)
    assert "allot.client.oneshot" in loaded  # it did read the import log
    assert sorted(m for m in loaded if m.startswith(NOT_FOR_SUBMIT)) == []
