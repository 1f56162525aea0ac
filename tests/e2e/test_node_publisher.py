"""A publisher in another language submits with its own identity, from the documented
contract alone: ``examples/node-publisher`` (Node.js, the ``nats`` and ``ajv`` packages),
which checks its request against ``proto/schema`` before it sends it."""

import asyncio
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from allot.client.stack import Stack
from allot.proto.events import JobSubmitted
from tests.e2e.test_auth import stack_records

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "node-publisher"


@pytest.fixture(scope="module")
def node() -> str:
    """The ``node`` binary, with the example's packages installed (from the npm registry,
    as its package-lock.json pins them)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.fail("this test needs Node.js 18+ and npm (Debian: apt-get install nodejs npm)")
    if not (EXAMPLE / "node_modules" / "nats").exists():
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=EXAMPLE, check=True, timeout=300)
    return node


def submit(node: str, stack: Stack, identity: Path, request: dict[str, object], tmp: Path):  # type: ignore[no-untyped-def]
    (tmp / "request.json").write_text(json.dumps(request))
    done = subprocess.run(
        [node, str(EXAMPLE / "submit.mjs"), str(tmp / "request.json")],
        env={"PATH": "/usr/bin:/bin", "ALLOT_NATS_URL": stack.url, "ALLOT_IDENTITY": str(identity)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else done.stderr


async def test_a_node_js_publisher_submits_as_itself(
    stack: Stack, node: str, tmp_path: Path
) -> None:
    assert stack.keyring is not None
    ci = stack.keyring.add("ci-bot", "user")
    stack.nats.reload()
    await asyncio.sleep(0.5)  # the server rereads its config
    job = {"account": "demo", "gpus": 1, "command": ["true"], "name": "build 1"}

    status, reply = submit(node, stack, ci, {"spec": job, "idempotency_key": "b-1"}, tmp_path)
    assert status == 0, reply
    again_status, again = submit(node, stack, ci, {"spec": job, "idempotency_key": "b-1"}, tmp_path)
    assert again_status == 0, again
    assert (again["job_id"], again["duplicate"]) == (reply["job_id"], True)
    [submitted] = [r.event for r in await stack_records(stack) if isinstance(r.event, JobSubmitted)]
    assert (submitted.job_id, submitted.by) == (reply["job_id"], "ci-bot")
    before = len(await stack_records(stack))

    # The schema refuses a misspelt field before anything is sent...
    status, refused = submit(node, stack, ci, {"spec": {**job, "gpu_count": 2}}, tmp_path)
    assert status == 2
    assert "additional" in refused["errors"][0]["message"]
    status, refused = submit(node, stack, ci, {"spec": {**job, "gpus": 0}}, tmp_path)
    assert status == 2
    assert refused["errors"][0]["field"] == "gpus"
    # ...and Allot what only it can know: this cluster has no node of 64 GPUs.
    status, refused = submit(node, stack, ci, {"spec": {**job, "gpus": 64}}, tmp_path)
    assert status == 2
    assert "the largest has" in refused["errors"][0]["message"]
    assert len(await stack_records(stack)) == before
