"""`allot up` on a data dir whose log another kind of NATS (one server, or a cluster) kept
says so: the log it starts is not that one."""

from pathlib import Path

from allot.client.stack import other_log


def test_a_cluster_started_where_one_server_kept_the_log_says_where_that_log_is(
    tmp_path: Path,
) -> None:
    assert other_log(tmp_path, cluster=True) is None
    (tmp_path / "nats" / "jetstream").mkdir(parents=True)
    said = other_log(tmp_path, cluster=True)
    assert said is not None
    assert str(tmp_path / "nats") in said
    assert "allot log export" in said
    assert other_log(tmp_path, cluster=False) is None


def test_one_server_started_where_a_cluster_kept_the_log_says_so_too(tmp_path: Path) -> None:
    (tmp_path / "nats-cluster" / "n1" / "jetstream").mkdir(parents=True)
    said = other_log(tmp_path, cluster=False)
    assert said is not None
    assert "--nats-cluster" in said
    assert other_log(tmp_path, cluster=True) is None
