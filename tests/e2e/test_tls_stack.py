"""A whole stack over TLS (``allot up --tls``): every service and node agent connects with
TLS, the CLI works as the README says, and adding a user keeps TLS on."""

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from allot.client.stack import NodeShape, Stack
from tests.integration.test_tls import server_info
from tests.stack import cli


@pytest.fixture
async def tls_stack(tmp_path: Path) -> AsyncIterator[Stack]:
    stack = Stack(
        tmp_path / "allot",
        [NodeShape(node_id="node-1", gpus=2)],
        heartbeat_s=0.2,
        stop_grace_s=2,
        restart=False,
        tls=True,
    )
    await stack.start()  # every service and the node agent ready: each connected over TLS
    yield stack
    await stack.stop()


async def test_a_job_runs_and_the_cli_works_over_tls(
    tls_stack: Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert (await server_info(tls_stack.nats))["tls_required"] is True
    submit = ["submit", "--gpus", "1", "--account", "demo", "--wait", "--"]
    done = cli(tls_stack, *submit, sys.executable, "-c", "print(42)")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "42"  # ran on the node agent, its output read back
    alone = cli(tls_stack, "submit", "--gpus", "1", "--account", "demo", "--", "true")
    assert alone.returncode == 0, alone.stderr  # the one-shot connection, over TLS
    assert alone.stdout.startswith("j-")

    # Through `allot up`'s record, as a user of the README's commands has it: no variables.
    home = tmp_path / "home"
    home.mkdir()
    where = {
        "nats_url": tls_stack.url,
        "data_dir": str(tls_stack.data_dir),
        "identity": str(tls_stack.operator),
        "tls_ca": str(tls_stack.tls_ca),
    }
    (home / "current.json").write_text(json.dumps(where))
    monkeypatch.setenv("ALLOT_HOME", str(home))
    monkeypatch.delenv("ALLOT_NATS_URL", raising=False)
    added = cli(tls_stack.url, "users", "add", "carol")
    assert added.returncode == 0, added.stderr
    await asyncio.sleep(0.5)  # the server rereads its config
    assert (await server_info(tls_stack.nats))["tls_required"] is True  # still TLS
    carol = tls_stack.data_dir / "identities" / "carol.json"
    status = cli(tls_stack, "status", identity=carol)
    assert status.returncode == 0, status.stderr


async def test_the_cli_without_the_ca_says_what_to_set(
    tls_stack: Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ALLOT_HOME", str(tmp_path / "nobody-home"))
    submit = ["submit", "--gpus", "1", "--account", "demo", "--", "true"]
    for command in (["status"], submit):  # by nats-py, and by the one-shot connection
        done = cli(tls_stack.url, *command, identity=tls_stack.operator)
        assert done.returncode != 0
        assert "set ALLOT_TLS_CA" in done.stderr
        assert "Traceback" not in done.stderr
