import pytest

from allot.bus.urls import redacted, servers


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("nats://alice:s3cret@nats.example:4222", "nats://alice:***@nats.example:4222"),
        ("nats://tok3n@10.0.0.1:4222", "nats://***@10.0.0.1:4222"),
        ("tls://a:b@h1:4222,tls://c:d@h2:4222", "tls://a:***@h1:4222,tls://c:***@h2:4222"),
        ("nats://127.0.0.1:4222", "nats://127.0.0.1:4222"),
        ("nats://u:p%40ss@host", "nats://u:***@host"),
        ("nats://u:p@ss@host", "nats://u:***@host"),
    ],
)
def test_credentials_in_a_nats_url_are_not_shown(url: str, shown: str) -> None:
    assert redacted(url) == shown


@pytest.mark.parametrize(
    ("url", "listed"),
    [
        ("nats://127.0.0.1:4222", ["nats://127.0.0.1:4222"]),
        (
            "nats://127.0.0.1:4222,nats://127.0.0.1:4223, nats://127.0.0.1:4224",
            ["nats://127.0.0.1:4222", "nats://127.0.0.1:4223", "nats://127.0.0.1:4224"],
        ),
        ("tls://a:b@h1:4222,,tls://c:d@h2:4222,", ["tls://a:b@h1:4222", "tls://c:d@h2:4222"]),
    ],
)
def test_a_nats_url_may_name_every_server_of_a_cluster(url: str, listed: list[str]) -> None:
    assert servers(url) == listed
