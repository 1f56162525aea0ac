"""One trace per job, exported over OTLP/HTTP by every service to a real receiving process
(``tests.otlp_receiver``): a job submitted from the CLI, preempted, requeued and finished."""

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from allot.bus.server import free_port
from allot.client.stack import NodeShape, Stack
from allot.core import JobStatus
from allot.proto.events import JobSpec, JobSubmitted
from tests.e2e.test_preemption import EXAMPLES, TRAIN, checkpointed
from tests.stack import cli, python, until

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
async def receiver(tmp_path: Path) -> AsyncIterator[tuple[int, Path]]:
    spans = tmp_path / "spans.jsonl"
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.otlp_receiver", str(spans),
        cwd=ROOT, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stdout is not None
    port = int(await asyncio.wait_for(process.stdout.readline(), 20))
    yield port, spans
    process.terminate()
    await process.wait()


def read_spans(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


async def spans_until(path: Path, ready: Any, timeout: float = 20) -> list[dict[str, Any]]:
    async with asyncio.timeout(timeout):
        while not ready(spans := read_spans(path)):
            await asyncio.sleep(0.2)
    return spans


async def test_one_trace_follows_a_job_through_preemption_and_requeue(
    tmp_path: Path, receiver: tuple[int, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    port, exported = receiver
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")  # ms: the standard variable
    stack = Stack(
        tmp_path / "allot", [NodeShape(node_id="node-1", gpus=4)],
        node_timeout_s=1.5, heartbeat_s=0.2, stop_grace_s=2, restart=False,
    )  # fmt: skip
    await stack.start()
    try:
        env = [f"--env={name}={value}" for name, value in TRAIN.items()]
        submitted = cli(
            stack, "submit", "--json", "--account", "lab/train", "--gpus", "4", "--resumable",
            "--grace", "20s", *env, f"--env=RESULT={tmp_path / 'result.json'}",
            "--", sys.executable, str(EXAMPLES / "train_numpy.py"),
        )  # fmt: skip
        assert submitted.returncode == 0, submitted.stderr
        train = json.loads(submitted.stdout)["job_id"]
        async with await stack.client() as client:
            await until(client, checkpointed(train), timeout=30)
            notebook = await client.submit(
                JobSpec(account="lab/nb", gpus=4, tier="interactive", command=python("1"))
            )
            assert notebook.job_id is not None
            done = await client.wait(train, timeout=60)
            assert (done.status, done.preemptions) == (JobStatus.SUCCEEDED, 1)
            [submission] = [
                r for r in await client.events.read()
                if isinstance(r.event, JobSubmitted) and r.event.job_id == train
            ]  # fmt: skip
        shown = cli(stack, "trace", train)
        assert cli(stack, "log", "export", str(tmp_path / "log.jsonl")).returncode == 0
        sent = cli(stack, "trace", "export", train, "--json")
    finally:
        await stack.stop()
    # The trace as the log tells it, from the stream and from an exported log alike.
    assert shown.returncode == 0, shown.stderr
    from_file = cli(str(tmp_path / "nowhere"), "trace", train, "--log", str(tmp_path / "log.jsonl"))
    assert from_file.stdout == shown.stdout
    lines = shown.stdout.splitlines()
    assert lines[0].startswith(f"{train} (lab/train, batch, 4 GPUs): succeeded")
    spans_shown = [line.split("|")[0].split()[-1] for line in lines if "|" in line]
    for step in ("queued", "run 0 on node-1", "stopping", "run 1 on node-1"):
        assert any(step in line for line in lines), step
    for point in ("chosen to stop: TIER for", "checkpoint", "preempted: lost", "requeued"):
        assert point in shown.stdout, point
    assert spans_shown.count("queued") == 2
    assert sent.returncode == 0, sent.stderr
    assert json.loads(sent.stdout)["jobs"] == 1

    def complete(spans: list[dict[str, Any]]) -> bool:
        names = {s["name"] for s in spans if s["attributes"].get("allot.job.id") == train}
        return {"node.JobExited", "preemptor.JobRequeued", "allot.submit", f"job {train}"} <= names

    spans = await spans_until(exported, complete)
    # The trace the log recorded for the job is the one every service's spans are in.
    trace_id = submission.headers["traceparent"].split("-")[1]
    mine = [s for s in spans if s["attributes"].get("allot.job.id") == train]
    assert {s["trace_id"] for s in mine} == {trace_id}
    by_name = {s["name"]: s for s in mine}
    services = {s["service"] for s in mine}
    assert {"allot-cli", "allot-intake", "allot-planner", "allot-preemptor", "allot-node"} <= (
        services
    )
    [intake_span] = [s for s in mine if s["service"] == "allot-intake"]  # (admin.)submit
    client_span = by_name["allot.submit"]
    assert intake_span["parent_span_id"] == client_span["span_id"]
    assert client_span["parent_span_id"] == ""  # the trace begins at the submitting client
    for name in ("planner.admitted", "planner.chose_to_stop", "preemptor.StopRequested",
                 "preemptor.JobPreempted", "preemptor.JobRequeued", "node.JobStarted",
                 "node.JobCheckpointed", "node.JobExited"):  # fmt: skip
        assert by_name[name]["parent_span_id"] == intake_span["span_id"], name
    # Twice admitted and started: once before the preemption, once after the requeue.
    assert sum(s["name"] == "planner.admitted" for s in mine) == 2
    assert sorted(s["attributes"]["allot.attempt"] for s in mine
                  if s["name"] == "node.JobStarted") == [0, 1]  # fmt: skip
    # A plan's part in the job links to the planning cycle, a trace of its own.
    cycles = {s["span_id"]: s for s in spans if s["name"] == "planner.cycle"}
    chose = by_name["planner.chose_to_stop"]
    [link] = chose["links"]
    cycle = cycles[link["span_id"]]
    assert cycle["trace_id"] != trace_id
    assert cycle["attributes"]["allot.plan.preempted"] == 1
    assert chose["attributes"]["allot.reason"] == "TIER"
    assert chose["attributes"]["allot.for"] == notebook.job_id
    assert by_name["node.JobStarted"]["attributes"]["allot.node"] == "node-1"
    assert by_name["preemptor.StopRequested"]["attributes"]["allot.account"] == "lab/train"
    # What ``trace export`` sent from the log joins the same trace, under the client's span.
    from_log = [s for s in spans if s["service"] == "allot-log"]
    assert {s["trace_id"] for s in from_log} == {trace_id}
    [job_span] = [s for s in from_log if s["name"] == f"job {train}"]
    assert job_span["parent_span_id"] == submission.headers["traceparent"].split("-")[2]
    assert len(from_log) == json.loads(sent.stdout)["spans"]
    # A backend that is not there is named, and nothing else goes wrong.
    nowhere = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", nowhere)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "2")
    unsent = cli(
        "nats://127.0.0.1:1", "trace", "export", train, "--log", str(tmp_path / "log.jsonl")
    )
    assert unsent.returncode == 1
    count = json.loads(sent.stdout)["spans"]
    said = f"allot: {nowhere}/v1/traces did not take {count} spans; is it up?"
    assert unsent.stderr.splitlines()[-1] == said
    assert "Traceback" not in unsent.stderr
