from pathlib import Path
from typing import Any

import pytest

from allot.bus.identity import IdentityError, Keyring, load
from allot.bus.permissions import permissions


def test_an_identity_is_kept_private_and_read_back(tmp_path: Path) -> None:
    keyring = Keyring(tmp_path / "ids")
    path = keyring.add("alice", "user")
    assert path.stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "ids").stat().st_mode & 0o777 == 0o700
    alice = load(path)
    assert (alice.name, alice.role, alice.public_key[0]) == ("alice", "user", "U")
    assert keyring.all() == [alice]


@pytest.mark.parametrize("name", ["alice", "../escape", "x" * 65, "a.b", ""])
def test_a_name_is_taken_once_and_must_be_a_principal(tmp_path: Path, name: str) -> None:
    keyring = Keyring(tmp_path)
    keyring.ensure("alice", "user")
    with pytest.raises(IdentityError, match="name="):
        keyring.add(name, "operator")
    assert [i.name for i in keyring.all()] == ["alice"]


@pytest.mark.parametrize("content", [b"", b"{}", b'{"name":"a","role":"user","seed":"SUx"}'])
def test_a_broken_identity_file_is_refused_by_name(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(IdentityError, match="not an Allot identity"):
        load(path)


def test_a_user_may_publish_only_its_own_commands_and_no_event(tmp_path: Path) -> None:
    user = load(Keyring(tmp_path).add("alice", "user"))
    allowed = permissions(user)["publish"]["allow"]
    assert not [s for s in allowed if s.startswith("allot.evt")]
    assert [s for s in allowed if s.startswith("allot.cmd")] == [
        "allot.cmd.alice.submit",
        "allot.cmd.alice.submit_many",
        "allot.cmd.alice.cancel",
        "allot.cmd.alice.query.>",  # questions to the read model, which change nothing
    ]
    assert not [s for s in allowed if "CONSUMER" in s]  # it reads by direct gets
    assert permissions(user)["subscribe"]["allow"] == ["_INBOX_alice.>"]


def test_a_service_may_send_only_its_own_counts_and_only_metrics_hears_them(
    tmp_path: Path,
) -> None:
    keyring = Keyring(tmp_path)
    planner = permissions(load(keyring.add("planner", "planner")))
    metrics = permissions(load(keyring.add("metrics", "metrics")))
    user = permissions(load(keyring.add("alice", "user")))
    assert [s for s in planner["publish"]["allow"] if "stats" in s] == ["allot.stats.planner"]
    assert "allot.stats.*" in metrics["subscribe"]["allow"]
    assert not [s for s in metrics["publish"]["allow"] if not s.startswith("$JS.")]
    for others in (planner, user):
        assert not [s for s in others["subscribe"]["allow"] if "stats" in s]


def test_output_is_asked_for_under_ones_own_name_and_only_its_node_hears_it(
    tmp_path: Path,
) -> None:
    keyring = Keyring(tmp_path)
    user = permissions(load(keyring.add("alice", "user")))
    admin = permissions(load(keyring.add("root", "operator")))
    node = permissions(load(keyring.ensure("node-1", "node", "node-1")))
    intake = permissions(load(keyring.add("intake", "intake")))

    def asks(block: dict[str, Any]) -> list[str]:
        return [s for s in block["publish"]["allow"] if s.startswith("allot.output")]

    assert asks(user) == ["allot.output.*.alice"]
    assert asks(admin) == ["allot.output.*.root", "allot.output.*.root.admin"]
    assert asks(node) == asks(intake) == []
    assert [s for s in node["subscribe"]["allow"] if "output" in s] == ["allot.output.node-1.>"]
    assert "allow_responses" in node
    for other in (user, admin, intake):
        assert not [s for s in other["subscribe"]["allow"] if "output" in s]
