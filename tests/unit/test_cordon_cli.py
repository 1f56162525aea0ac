"""``allot nodes cordon``: what it refuses before it asks anything of the cluster."""

import io

import pytest

from allot.client.cli import main


def test_a_drain_now_without_a_terminal_needs_yes(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))  # piped: no one to ask
    # No cluster at this address: the refusal comes before any connection.
    argv = ["nodes", "cordon", "n1", "--drain", "--now", "--nats-url", "nats://127.0.0.1:9"]
    assert main(argv) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1
    assert "add --yes" in err[0]


def test_now_without_drain_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["nodes", "cordon", "n1", "--now", "--nats-url", "nats://127.0.0.1:9"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert "--drain" in line
