"""A service's health over HTTP (``allot.services.health``): ``/readyz`` fails before the
service has caught up with the log and while NATS is away, and passes otherwise; ``/livez``
passes while the process answers at all."""

import asyncio
import re
import sys
from pathlib import Path

from allot.bus import EmbeddedNats, EventLog
from allot.bus.server import free_port
from allot.core import State
from allot.services import health
from allot.services.runtime import follow_state
from tests import builders as b


async def get(port: int, path: str, method: str = "GET") -> tuple[int, str]:
    """The status and body of ``method path`` on this machine's ``port``."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(f"{method} {path} HTTP/1.1\r\nHost: probe\r\n\r\n".encode())
        answer = (await reader.read()).decode()
    finally:
        writer.close()
    head, _, body = answer.partition("\r\n\r\n")
    return int(head.split()[1]), body


async def until_status(port: int, path: str, status: int, timeout: float = 20) -> str:
    """Probe until ``path`` answers ``status``; the body it answered with."""
    seen = "nothing"
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        try:
            code, body = await get(port, path)
            if code == status:
                return body
            seen = f"{code} {body.strip()}"
        except OSError as error:
            seen = repr(error)
        await asyncio.sleep(0.1)
    raise AssertionError(f"{path} never answered {status}; last: {seen}")


async def test_not_ready_until_the_log_is_folded_and_acted_on(event_log: EventLog) -> None:
    for i in range(3):
        await event_log.append(b.submitted(f"j-{i}"))
    checks = health.Health()
    checks.connected = lambda: event_log.nc.is_connected
    port = free_port()
    server = await health.serve(checks, "127.0.0.1", port)
    acting, act = asyncio.Event(), asyncio.Event()

    async def on_caught_up() -> None:
        acting.set()
        await act.wait()  # the service has read the log, and is still acting on it

    async def service() -> None:
        health.reporting_to(checks)  # in this task's context, as run_service does
        await follow_state(event_log, State(), on_caught_up)

    following = asyncio.create_task(service())
    try:
        await asyncio.wait_for(acting.wait(), 10)
        assert await get(port, "/readyz") == (503, "not ready: still reading the log\n")
        assert await get(port, "/livez") == (200, "ok\n")
        act.set()
        body = await until_status(port, "/readyz", 200)
        assert body == "ready: caught up at sequence 3\n"
        assert (await get(port, "/nothing"))[0] == 404
        assert (await get(port, "/readyz", method="POST"))[0] == 405
        _, flood = await asyncio.open_connection("127.0.0.1", port)
        flood.write(b"G" * 100_000)  # no request line: dropped, and the next probe answered
        await flood.drain()
        flood.close()
        assert (await get(port, "/livez"))[0] == 200
    finally:
        following.cancel()
        server.close()
    assert health._current.get() is None  # the test's own context never reported


async def test_a_service_process_is_ready_only_while_nats_is_there(tmp_path: Path) -> None:
    nats = await EmbeddedNats(tmp_path / "nats").start()
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "allot.services.intake", "--nats-url", nats.url,
        "--health-port", str(port),
    )  # fmt: skip
    try:
        await until_status(port, "/readyz", 200)
        await nats.stop()
        body = await until_status(port, "/readyz", 503)
        assert body == "not ready: not connected to NATS\n"
        assert await get(port, "/livez") == (200, "ok\n")
        await nats.start()
        await until_status(port, "/readyz", 200)
    finally:
        process.terminate()
        await process.wait()
        await nats.stop()


async def bound_health_port(log: Path, timeout: float = 60) -> int:
    """The port a service said it answers health checks on, read from its log: asking for
    port 0 and reading the answer leaves no window for another process to take the port."""
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        found = re.search(r"health checks on http://127\.0\.0\.1:(\d+)/readyz", log.read_text())
        if found:
            return int(found.group(1))
        await asyncio.sleep(0.1)
    raise AssertionError(f"{log.name} never said where it answers: {log.read_text()!r}")


async def test_every_service_and_the_node_agent_answer_health_checks(
    nats_server: EmbeddedNats, tmp_path: Path
) -> None:
    services: dict[str, list[str]] = {
        "intake": [], "ledger": [], "planner": [], "preemptor": [], "telemetry": [],
        "view": [], "metrics": ["--port", "0"],
        "node": ["--node-id", "n-1", "--gpus", "2", "--work-dir", str(tmp_path / "n-1")],
    }  # fmt: skip
    processes, logs = [], []
    for name, arguments in services.items():
        command = ["-m", f"allot.services.{name}", "--nats-url", nats_server.url]
        command += ["--health-port", "0", *arguments]
        logs.append(tmp_path / f"{name}.log")
        with logs[-1].open("wb") as stderr:
            processes.append(
                await asyncio.create_subprocess_exec(sys.executable, *command, stderr=stderr)
            )
    try:
        for log in logs:
            await until_status(await bound_health_port(log), "/readyz", 200, timeout=60)
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            await process.wait()


async def test_a_health_port_in_use_is_one_clear_line(nats_server: EmbeddedNats) -> None:
    taken = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = taken.sockets[0].getsockname()[1]
    try:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "allot.services.planner", "--nats-url", nats_server.url,
            "--health-port", str(port), stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        _, err = await asyncio.wait_for(process.communicate(), 30)
    finally:
        taken.close()
    assert process.returncode == 2
    [line] = err.decode().splitlines()
    assert line.startswith(f"allot-planner: --health-port {port}: ")
