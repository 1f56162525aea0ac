"""What a service process writes to its log about where it connects."""

import asyncio
import sys

from allot.bus import EmbeddedNats


async def test_a_service_logs_its_nats_url_without_the_password(
    nats_server: EmbeddedNats,
) -> None:
    # A server without authorization accepts (and ignores) any credentials.
    url = nats_server.url.replace("nats://", "nats://alice:s3cret-pass@")
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "allot.services.ledger",
        "--nats-url",
        url,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stderr is not None
    lines: list[str] = []
    try:
        async with asyncio.timeout(20):
            while not any("started" in line for line in lines):
                line = await process.stderr.readline()
                assert line, f"the ledger exited: {lines}"
                lines.append(line.decode())
    finally:
        process.terminate()
        await process.wait()
    started = next(line for line in lines if "started" in line)
    assert "s3cret-pass" not in "".join(lines)
    assert f"alice:***@127.0.0.1:{nats_server.port}" in started
