"""Starting the embedded ``nats-server``: when it cannot start, the error says why."""

import socket
from pathlib import Path

import pytest

from allot.bus import EmbeddedNats


async def test_a_server_that_cannot_listen_says_the_port_is_taken(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        with pytest.raises(RuntimeError, match=rf"exited with 1: .*{port}.*in use"):
            await EmbeddedNats(tmp_path / "nats", port=port).start(timeout=10)
