"""Ten thousand hostile messages appended to the log of a running stack: no service stops,
each still answers, replay agrees with every plan the live planner made, and work goes on."""

from collections import Counter
from pathlib import Path

import pytest

from allot.client import AsyncClient
from allot.client.stack import Stack
from allot.core import JobStatus
from allot.proto.events import JobSpec
from allot.proto.subjects import health
from tests.fault.test_hostile_input import alive
from tests.fuzz import Fuzzer
from tests.stack import cli, python

MESSAGES = 10_000


@pytest.mark.slow
async def test_ten_thousand_hostile_events_stop_nothing(stack: Stack, client: AsyncClient) -> None:
    everyone = alive(stack)
    # Plans are left out: the planner's own are what replay must verify, and a forged one
    # is rightly found unjustified (the subject is the planner's alone to write).
    kinds: Counter[str] = Counter()
    for subject, data in Fuzzer(seed=7, prefix="fuzz-node-", plans=False).messages(MESSAGES):
        kinds[subject.rsplit(".", 1)[-1]] += 1
        await client.events.js.publish(subject, data, stream=client.events.settings.name)
    assert sum(kinds.values()) == MESSAGES
    assert len(kinds) > 20  # every kind of event, mutated

    # Every service has folded all of it and still answers.
    end = await client.events.last_seq()
    for service in ("intake", "ledger"):
        reply = await client.events.nc.request(health(service), b"", timeout=10)
        assert reply.data == b'{"ok":true}'
    job = await client.submit(
        JobSpec(account="lab/a", gpus=1, flavor="SIM-H100", command=python("print(1)"))
    )
    assert job.job_id is not None
    assert (await client.wait(job.job_id, timeout=60)).status == JobStatus.SUCCEEDED
    assert alive(stack) == everyone

    verified = cli(stack, "replay", "--verify")
    assert verified.returncode == 0, verified.stdout[-2000:] + verified.stderr[-2000:]
    assert "all match" in verified.stdout
    plans = int(verified.stdout.rsplit(" plans recomputed", 1)[0].rsplit(" ", 1)[-1])
    assert plans > 0
    assert (await client.events.last_seq()) >= end
    for log in Path(stack.logs).glob("*.log"):
        assert "Traceback" not in log.read_text(errors="replace"), log.name
