"""`allot up --dashboard-port`: the dashboard's port, 8265 unless told, 0 for a free one."""

import argparse

import pytest

from allot.client.upargs import DASHBOARD_PORT, dashboard_option


def test_the_dashboard_port_defaults_to_8265_and_takes_0_for_a_free_one() -> None:
    up = argparse.ArgumentParser(prog="allot up", exit_on_error=False)
    dashboard_option(up)
    assert up.parse_args([]).dashboard_port == DASHBOARD_PORT == 8265
    assert up.parse_args(["--dashboard-port", "0"]).dashboard_port == 0
    with pytest.raises(argparse.ArgumentError, match="dashboard-port"):
        up.parse_args(["--dashboard-port", "eighty"])
