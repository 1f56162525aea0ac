"""The command line's one-shot connection against a peer that is no honest NATS server: what
it sends is hostile input like any other, and ends in an error that says what was wrong,
never a traceback or a hang. (What it does against a real nats-server is tested where the
CLI is: tests/e2e/test_auth.py, test_tls_stack.py, tests/integration/test_cli_errors.py.)"""

import socket
import threading
from collections.abc import Callable, Iterator

import pytest

from allot.client.oneshot import Connection, ServerError
from allot.client.sending import NoAnswer
from allot.proto.commands import SubmitReply

Serve = Callable[[Callable[[socket.socket], None]], str]
INFO = b'INFO {"server_id":"x","max_payload":1048576,"headers":true}\r\n'


@pytest.fixture
def peer() -> Iterator[Serve]:
    """A listening socket on loopback; the one connection to it is handed to ``behave``."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(10)
    threads: list[threading.Thread] = []

    def serve(behave: Callable[[socket.socket], None]) -> str:
        def accept() -> None:
            conn, _ = listener.accept()
            with conn:
                behave(conn)

        thread = threading.Thread(target=accept, daemon=True)
        thread.start()
        threads.append(thread)
        return f"nats://127.0.0.1:{listener.getsockname()[1]}"

    yield serve
    listener.close()
    for thread in threads:
        thread.join(5)


def connected(conn: socket.socket, then: bytes) -> None:
    """INFO, the answer to the client's CONNECT and PING, then ``then`` after its request."""
    conn.sendall(INFO)
    received = b""
    while b"PING\r\n" not in received:
        received += conn.recv(65536)
    conn.sendall(b"PONG\r\n")
    received = b""
    while b"PUB " not in received:
        received += conn.recv(65536)
    conn.sendall(then)
    conn.recv(65536)  # until the client leaves


def test_a_peer_that_speaks_no_nats_is_no_server(peer: Serve) -> None:
    url = peer(lambda conn: conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n"))
    with pytest.raises(ConnectionError, match=r"no INFO from the server but b'HTTP/1\.1'"):
        Connection.open(url)


def test_an_info_that_is_no_json_is_no_server(peer: Serve) -> None:
    url = peer(lambda conn: conn.sendall(b"INFO {not json\r\n"))
    with pytest.raises(ConnectionError):
        Connection.open(url)


def test_a_line_without_end_is_cut_off(peer: Serve) -> None:
    url = peer(lambda conn: conn.sendall(b"INFO " + b"x" * (2 << 20)))
    with pytest.raises(ConnectionError, match="a line of over"):
        Connection.open(url)


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        (b"MSG _INBOX_x 1 notanumber\r\n", "a malformed MSG line"),
        (b"MSG _INBOX_x 1 99999999999\r\n", "a MSG of 99999999999 bytes"),
        (b"HMSG _INBOX_x 1 50 10\r\n", "a HMSG of 10 bytes"),
        (b"-ERR 'Unknown Protocol Operation'\r\n", "Unknown Protocol Operation"),
    ],
)
def test_a_reply_that_is_no_nats_message_says_what_it_was(
    peer: Serve, reply: bytes, said: str
) -> None:
    url = peer(lambda conn: connected(conn, reply))
    with Connection.open(url) as connection, pytest.raises(ServerError, match=said):
        connection.ask("submit", b"{}", SubmitReply, timeout=5, attempts=1)


def test_a_reply_that_is_no_submit_reply_is_refused(peer: Serve) -> None:
    reply = b'MSG _INBOX_x 1 12\r\n{"job_id":1}\r\n'
    url = peer(lambda conn: connected(conn, reply))
    refused = pytest.raises(ServerError, match=r"no SubmitReply.*job_id")
    with Connection.open(url) as connection, refused:
        connection.ask("submit", b"{}", SubmitReply, timeout=5, attempts=1)


def test_no_responders_is_no_answer(peer: Serve) -> None:
    reply = b"HMSG _INBOX_x 1 16 16\r\nNATS/1.0 503\r\n\r\n\r\n"
    url = peer(lambda conn: connected(conn, reply))
    with Connection.open(url) as connection, pytest.raises(NoAnswer, match="no responders"):
        connection.ask("submit", b"{}", SubmitReply, timeout=5, attempts=1)
