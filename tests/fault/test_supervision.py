"""Supervision by `allot up`: its children die with it, crash loops back off, NATS is restarted."""

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from allot.bus.server import Backoff
from allot.client.stack import NodeShape, Stack
from allot.core import JobStatus
from allot.proto.events import JobSpec
from tests.stack import gone, python


def children(parent: int) -> dict[int, list[str]]:
    """The live processes whose parent is ``parent``, with their command lines."""
    found: dict[int, list[str]] = {}
    for proc in Path("/proc").iterdir():
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == parent and fields[0] != "Z":
                found[int(proc.name)] = (proc / "cmdline").read_bytes().decode().split("\0")[:-1]
    return found


def running_as(argv: list[str]) -> str:
    """``allot.services.planner`` or ``nats-server``: what a child runs."""
    if "-m" in argv:
        return argv[argv.index("-m") + 1]
    return Path(argv[0]).name


def test_children_of_a_killed_allot_up_die_with_it(tmp_path: Path) -> None:
    env = {**os.environ, "ALLOT_HOME": str(tmp_path / "home")}
    env.pop("ALLOT_NATS_URL", None)
    up = subprocess.Popen(
        [sys.executable, "-m", "allot.client.cli", "up", "--nodes", "1x8",
         "--data-dir", str(tmp_path / "data")],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    orphans: dict[int, list[str]] = {}
    try:
        assert up.stdout is not None
        assert up.stdout.readline().startswith("Allot is up")
        orphans = children(up.pid)
        assert sorted(running_as(argv) for argv in orphans.values()) == [
            "allot.services.intake",
            "allot.services.ledger",
            "allot.services.metrics",
            "allot.services.node",
            "allot.services.planner",
            "allot.services.preemptor",
            "allot.services.telemetry",
            "allot.services.view",
            "nats-server",
        ]

        up.kill()
        up.wait()
        asyncio.run(all_gone(orphans, timeout=5))
    finally:
        up.kill()
        up.wait()
        for pid in orphans:  # so that a failure leaves nothing behind
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


async def all_gone(processes: dict[int, list[str]], timeout: float) -> None:
    try:
        async with asyncio.timeout(timeout):
            for pid in processes:
                await gone(pid)
    except TimeoutError:
        left = [
            running_as(argv) for pid, argv in processes.items() if Path(f"/proc/{pid}").exists()
        ]
        raise AssertionError(f"{left} outlived allot up") from None


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGHUP], ids=["ctrl-c", "hangup"])
def test_a_terminal_signal_stops_allot_up_in_order_without_restarting_anything(
    tmp_path: Path, signum: signal.Signals
) -> None:
    env = {**os.environ, "ALLOT_HOME": str(tmp_path / "home")}
    env.pop("ALLOT_NATS_URL", None)
    up = subprocess.Popen(
        [sys.executable, "-m", "allot.client.cli", "up", "--nodes", "1x8",
         "--data-dir", str(tmp_path / "data")],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,  # its own terminal-like process group
    )  # fmt: skip
    try:
        assert up.stdout is not None
        assert up.stdout.readline().startswith("Allot is up")
        os.killpg(up.pid, signum)  # as a terminal does: to the whole foreground group
        _, stderr = up.communicate(timeout=30)
    finally:
        with contextlib.suppress(ProcessLookupError):  # so that a failure leaves nothing
            os.killpg(up.pid, signal.SIGKILL)
        up.wait()
    assert up.returncode == 0, stderr
    assert "restarting" not in stderr


@pytest.mark.slow
async def test_a_crash_looping_service_is_restarted_with_growing_delays(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="allot.up")
    starts = tmp_path / "starts"
    async with Stack(tmp_path / "allot", [NodeShape(node_id="node-1", gpus=1)]) as s:
        planner = s.children["planner"]
        assert planner.process is not None
        # From now on the planner fails at every start, and notes when it started.
        note_start = f"open({str(starts)!r}, 'a').write(f'{{time.time()}}\\n')"
        planner.argv = python(f"import time; {note_start}; raise SystemExit(3)")
        planner.process.kill()
        async with asyncio.timeout(15):
            while len(starts.read_text().split() if starts.exists() else []) < 4:
                await asyncio.sleep(0.1)

    exits = [r for r in caplog.records if r.getMessage().startswith("planner exited")][:4]
    stated = [r.getMessage().partition("restarting in ")[2].split("s ")[0] for r in exits]
    assert stated == ["0.5", "1.0", "2.0", "4.0"]
    # Measured, not only stated: each start came that long after the exit before it.
    waited = [
        float(start) - ended.created
        for ended, start in zip(exits, starts.read_text().split()[:4], strict=True)
    ]
    assert all(float(d) <= w < float(d) + 1 for d, w in zip(stated, waited, strict=True)), waited


async def test_a_killed_nats_server_is_restarted_and_the_stack_works_again(
    tmp_path: Path,
) -> None:
    async with (
        Stack(tmp_path / "allot", [NodeShape(node_id="node-1", gpus=1)]) as s,
        await s.client() as client,
    ):
        [nats] = [
            p for p, argv in children(os.getpid()).items() if running_as(argv) == "nats-server"
        ]
        os.kill(nats, signal.SIGKILL)
        await gone(nats)

        reply = await asyncio.wait_for(
            client.submit(JobSpec(account="lab/a", gpus=1, command=python("pass"))), 20
        )
        assert reply.job_id is not None
        # The services' ordered consumers see that the server lost them only when its
        # heartbeats stop coming (about 15 s), then resume where they were.
        job = await client.wait(reply.job_id, timeout=30)
        assert job.status == JobStatus.SUCCEEDED
        [restarted] = [
            p for p, argv in children(os.getpid()).items() if running_as(argv) == "nats-server"
        ]
        assert restarted != nats


def test_restart_delays_double_up_to_a_cap_and_reset_after_a_stable_run() -> None:
    backoff = Backoff(first_s=0.5, max_s=4, stable_s=10)
    delays: list[float] = []
    delay = None
    for _ in range(6):
        delay = backoff.next(delay, uptime_s=0.1)
        delays.append(delay)
    assert delays == [0.5, 1, 2, 4, 4, 4]
    assert backoff.next(4, uptime_s=10) == 0.5
