"""Ordinary failures of the `allot` command line, as a user meets them: one line saying what
failed and what to do, an exit code of its own (allot.client.exitcodes), never a traceback.
The CLI runs as a real process against a real nats-server or a port nothing listens on."""

import asyncio
import os
import socket
import subprocess
import sys
from pathlib import Path

import nats
import pytest
from nats.aio.msg import Msg

from allot.bus import EmbeddedNats
from allot.client import exitcodes
from allot.proto.subjects import COMMANDS_PREFIX

ALLOT = [sys.executable, "-m", "allot.client.cli"]


def environment(tmp_path: Path) -> dict[str, str]:
    """No `allot up` here, no identity, no NATS URL but the one a test passes."""
    env = {**os.environ, "ALLOT_HOME": str(tmp_path / "home")}
    for name in ("ALLOT_NATS_URL", "ALLOT_IDENTITY", "ALLOT_TLS_CA"):
        env.pop(name, None)
    return env


async def allot(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI as a process, off the event loop (the nats-server fixture lives on it)."""
    return await asyncio.to_thread(
        subprocess.run,
        [*ALLOT, *args],
        env=environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )


def one_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


def dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_nats_unreachable_says_so_in_one_line(tmp_path: Path) -> None:
    url = f"nats://127.0.0.1:{dead_port()}"
    done = await allot(tmp_path, "status", "--nats-url", url)
    line = one_line(done.stderr)
    assert line.startswith(f"allot: cannot reach NATS at {url}"), line
    assert "allot up" in line
    assert "--nats-url" in line
    assert "ALLOT_NATS_URL" in line
    assert done.returncode == exitcodes.UNREACHABLE


async def test_a_command_nobody_answers_names_the_service(
    tmp_path: Path, nats_server: EmbeddedNats
) -> None:
    done = await allot(tmp_path, "cancel", "j-1", "--nats-url", nats_server.url)
    line = one_line(done.stderr)
    assert "intake" in line, line
    assert "did not answer" in line, line
    assert done.returncode == exitcodes.NO_ANSWER


async def test_reading_a_log_nobody_keeps_says_what_is_missing(
    tmp_path: Path, nats_server: EmbeddedNats
) -> None:
    """A bare NATS server: no event stream until Allot's services have made one."""
    done = await allot(tmp_path, "status", "--nats-url", nats_server.url)
    line = one_line(done.stderr)
    assert line.startswith("allot: "), line
    assert done.returncode == exitcodes.NO_ANSWER


async def test_an_account_tree_over_the_payload_limit_is_named(
    tmp_path: Path, nats_server: EmbeddedNats
) -> None:
    big = tmp_path / "accounts.toml"
    rows = [f'[accounts."team{i:06d}"]\nweight = 1\n' for i in range(80_000)]
    big.write_text("".join(rows))
    assert big.stat().st_size > 2_000_000
    done = await allot(tmp_path, "accounts", "apply", str(big), "--nats-url", nats_server.url)
    line = one_line(done.stderr)
    assert "too large" in line, line
    assert "1048576" in line or "1 MiB" in line, line  # the server's limit
    assert done.returncode == exitcodes.TOO_LARGE


async def test_a_submission_over_the_payload_limit_is_named(
    tmp_path: Path, nats_server: EmbeddedNats
) -> None:
    # One argument takes at most 128 KiB (Linux): twelve of 100 kB make 1.2 MB.
    env = [a for i in range(12) for a in ("--env", f"BIG{i}={'x' * 100_000}")]
    done = await allot(tmp_path, "submit", "--gpus", "1", "--account", "a", *env,
                       "--nats-url", nats_server.url, "--", "true")  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr
    line = one_line(done.stderr)
    assert "submit command is too large" in line, line
    assert done.returncode == exitcodes.TOO_LARGE


def test_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    """`allot … | head -0`: the reader is gone before anything is written."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [*ALLOT, "users", "add", "alice", "--identities", str(tmp_path / "ids")],
            env=environment(tmp_path),
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    finally:
        os.close(write_end)
    assert done.stderr == "", done.stderr
    assert done.returncode == exitcodes.BROKEN_PIPE


@pytest.mark.slow
async def test_a_command_nobody_replies_to_in_time_names_the_service(
    tmp_path: Path, nats_server: EmbeddedNats
) -> None:
    """Something takes the grant and never replies (a service stuck, or overloaded)."""
    silent = await nats.connect(nats_server.url)
    try:
        await silent.subscribe(f"{COMMANDS_PREFIX}.>", cb=ignore)
        await silent.flush()
        done = await allot(tmp_path, "budget", "grant", "lab", "--gpu-hours", "1",
                           "--nats-url", nats_server.url)  # fmt: skip
    finally:
        await silent.close()
    line = one_line(done.stderr)
    assert "the ledger service did not answer" in line, line
    assert "no reply within 10s" in line, line
    assert done.returncode == exitcodes.NO_ANSWER


async def ignore(msg: Msg) -> None:
    pass
