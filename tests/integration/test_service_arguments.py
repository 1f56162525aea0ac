"""A service given a period it cannot run by stops before it starts, saying which
argument, the value and what is accepted: a NaN, negative or endless period would
otherwise spin a loop, stall one, or plan never."""

import subprocess
import sys

import pytest


@pytest.mark.parametrize(
    ("service", "flag", "value", "accepted"),
    [
        ("planner", "--min-interval", "nan", "from 0 to 1"),
        ("planner", "--tick", "0", "from 0.01 to 86400"),
        ("planner", "--snapshot-interval", "-1", "from 0 to 86400"),
        ("preemptor", "--tick", "-1", "from 0.01 to 86400"),
        ("node", "--heartbeat", "inf", "from 0.01 to 86400"),
        ("node", "--stop-grace", "1e9", "from 0 to 3600"),
        ("telemetry", "--node-timeout", "soon", "from 0.1 to 86400"),
        ("ledger", "--accounting-interval", "0", "from 0.1 to 86400"),
        ("view", "--refresh", "nan", "from 0.01 to 86400"),
        ("metrics", "--refresh", "-5", "from 0.01 to 86400"),
    ],
)
def test_a_period_out_of_range_is_a_usage_error_naming_it(
    service: str, flag: str, value: str, accepted: str
) -> None:
    module = f"allot.services.{service}"
    done = subprocess.run(
        [sys.executable, "-m", module, "--nats-url", "nats://127.0.0.1:1", flag, value],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert f"argument {flag}: '{value}': a number of seconds {accepted}" in done.stderr
    assert "Traceback" not in done.stderr
