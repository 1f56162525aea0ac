"""The command line's one-shot connection against a peer that is no honest NATS server: what
it sends is hostile input like any other, and ends in an error that says what was wrong,
never a traceback, a hang or unbounded memory. (What it does against a real nats-server is
tested where the CLI is: tests/e2e/test_auth.py, test_tls_stack.py,
tests/integration/test_cli_errors.py and test_cli_oneshot.py.)"""

import re
import socket
import threading
from collections.abc import Callable, Iterator

import pytest

from allot.client.oneshot import Connection, ServerError, UnsupportedUrl
from allot.client.sending import NoAnswer
from allot.proto.commands import SubmitReply

Behave = Callable[[socket.socket], None]
Serve = Callable[..., str]
INFO = b'INFO {"server_id":"x","max_payload":1048576,"headers":true}\r\n'


@pytest.fixture
def peer() -> Iterator[Serve]:
    """A listening socket on loopback; its connections, one after the other, are handed to
    the behaviours given, in order."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(10)
    threads: list[threading.Thread] = []

    def serve(*behaviours: Behave) -> str:
        def accept() -> None:
            for behave in behaviours:
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


def connected(then: Callable[[bytes], bytes] | bytes) -> Behave:
    """INFO, the answer to the client's CONNECT and PING, then ``then`` (or what it makes of
    the request's sid) after its request, until the client leaves."""

    def behave(conn: socket.socket) -> None:
        conn.sendall(INFO)
        received = b""
        while b"PING\r\n" not in received:
            received += conn.recv(65536)
        conn.sendall(b"PONG\r\n")
        received = b""
        while b"PUB " not in received:
            received += conn.recv(65536)
        sub = re.search(rb"SUB \S+ (\d+)\r\n", received)
        assert sub is not None
        conn.sendall(then(sub[1]) if callable(then) else then)
        while conn.recv(65536):
            pass

    return behave


def saying(what: bytes) -> Behave:
    return lambda conn: conn.sendall(what)


def test_a_peer_that_speaks_no_nats_is_no_server(peer: Serve) -> None:
    url = peer(saying(b"HTTP/1.1 400 Bad Request\r\n\r\n"))
    with pytest.raises(ConnectionError, match=r"no INFO from the server but b'HTTP/1\.1'"):
        Connection.open(url)


@pytest.mark.parametrize(
    "info",
    [
        b"INFO {not json",
        b"INFO []",
        b'INFO {"max_payload":[]}',
        b'INFO {"max_payload":null}',
        b'INFO {"max_payload":-1}',
        b'INFO {"max_payload":1e400}',
        b'INFO {"nonce":5}',
        b'INFO {"x":' + b"[" * 200_000 + b"]" * 200_000 + b"}",
    ],
)
def test_an_info_that_is_no_servers_is_no_server(peer: Serve, info: bytes) -> None:
    url = peer(saying(info + b"\r\n"))
    with pytest.raises(ConnectionError, match="an INFO that is no server's"):
        Connection.open(url)


def test_a_line_without_end_is_cut_off(peer: Serve) -> None:
    url = peer(saying(b"INFO " + b"x" * (2 << 20)))
    with pytest.raises(ConnectionError, match="a line of over"):
        Connection.open(url)


def test_a_url_of_another_kind_is_refused_before_connecting() -> None:
    with pytest.raises(UnsupportedUrl, match=r"ws://127\.0\.0\.1:1: the command line connects by"):
        Connection.open("nats://127.0.0.1:1,ws://127.0.0.1:1")


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        (b"MSG _INBOX_x 1 notanumber\r\n", "a malformed MSG line"),
        (b"MSG 5\r\nhello\r\n", "a malformed MSG line"),
        (b"MSG a 1 b c 5\r\nhello\r\n", "a malformed MSG line"),
        (b"HMSG _INBOX_x 1 5\r\nhello\r\n", "a malformed HMSG line"),
        (b"MSG _INBOX_x 1 99999999999\r\n", "a MSG of 99999999999 bytes"),
        (b"MSG _INBOX_x 1 2000000\r\n", "a MSG of 2000000 bytes"),  # never read, held
        (b"HMSG _INBOX_x 1 50 10\r\n", "a HMSG of 10 bytes"),
        (b"HELLO there\r\n", "which is no NATS operation"),
        (b"-ERR 'Unknown Protocol Operation'\r\n", "Unknown Protocol Operation"),
        (b"-ERR 'red \x1b[31m alert'\r\n", r"red \?\[31m alert"),  # no escape reaches a terminal
    ],
)
def test_a_reply_that_is_no_nats_message_says_what_it_was(
    peer: Serve, reply: bytes, said: str
) -> None:
    url = peer(connected(reply))
    with Connection.open(url) as connection, pytest.raises(ServerError, match=said):
        connection.ask("submit", b"{}", SubmitReply, timeout=5, attempts=1)


def test_a_reply_that_is_no_submit_reply_is_refused(peer: Serve) -> None:
    url = peer(connected(b'MSG _INBOX_x 1 12\r\n{"job_id":1}\r\n'))
    refused = pytest.raises(ServerError, match=r"no SubmitReply.*job_id")
    with Connection.open(url) as connection, refused:
        connection.ask("submit", b"{}", SubmitReply, timeout=5, attempts=1)


def test_no_responders_is_no_answer(peer: Serve) -> None:
    url = peer(connected(b"HMSG _INBOX_x 1 16 16\r\nNATS/1.0 503\r\n\r\n\r\n"))
    with Connection.open(url) as connection, pytest.raises(NoAnswer, match="no responders"):
        connection.ask("submit", b"{}", SubmitReply, timeout=5, attempts=1)


def test_a_reply_cut_off_by_the_timeout_is_asked_again_in_step(peer: Serve) -> None:
    """The first reply stops halfway until the client gives up on it: what is left of it
    must not be read as what comes next, so the request goes again on a new connection."""
    half = b"MSG _INBOX_x 1 100\r\n" + b"x" * 50
    whole = b'{"job_id":"j-1","seq":7}'

    def answer(sid: bytes) -> bytes:
        return b"MSG _INBOX_x %s %d\r\n%s\r\n" % (sid, len(whole), whole)

    url = peer(connected(half), connected(answer))
    with Connection.open(url) as connection:
        reply = connection.ask("submit", b"{}", SubmitReply, timeout=1, attempts=2)
    assert (reply.job_id, reply.seq) == ("j-1", 7)
