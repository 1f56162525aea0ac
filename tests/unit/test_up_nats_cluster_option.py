"""`allot up --nats-cluster N`: N nats-servers as one JetStream cluster; none: one server."""

import argparse

import pytest

from allot.client.upargs import nats_cluster_option


def parser() -> argparse.ArgumentParser:
    up = argparse.ArgumentParser(prog="allot up", exit_on_error=False)
    nats_cluster_option(up)
    return up


def test_one_server_unless_a_cluster_is_asked_for() -> None:
    assert parser().parse_args([]).nats_cluster is None
    assert parser().parse_args(["--nats-cluster", "3"]).nats_cluster == 3
    assert parser().parse_args(["--nats-cluster", "5"]).nats_cluster == 5


@pytest.mark.parametrize("given", ["1", "2", "0", "-3", "three"])
def test_a_cluster_too_small_for_three_copies_of_the_log_is_refused(given: str) -> None:
    with pytest.raises(argparse.ArgumentError) as refused:
        parser().parse_args(["--nats-cluster", given])
    said = str(refused.value)
    assert "--nats-cluster" in said
    assert repr(given) in said or given in said
    assert "3 or more" in said


def test_the_help_of_allot_up_says_what_it_does() -> None:
    text = parser().format_help()
    assert "--nats-cluster N" in text
    assert "R3" in text or "three copies" in text
