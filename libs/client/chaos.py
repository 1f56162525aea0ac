"""Chaos on a whole stack: kill -9 every kind of process in turn, then at random, under a
steady load of submissions, let the supervisor restart them, and check what must hold
from the exported log afterwards, and from the nodes' work directories what processes ran
(``allot.client.chaos_check``; docs/adr/0026).

The load submits as a CI client does: every submission has an idempotency key and is
retried with the same key, on a fresh connection where needed, until it is acknowledged
(or, after ``SUBMIT_GIVE_UP_S``, given up: never acknowledged, so nothing is owed for it).
The jobs are short real processes on simulated nodes: plain ones, checkpointing ones that
resume (``allot.workload``), and interactive ones that preempt the others.

Everything random comes from one seed: the kills, their targets, the jobs and their timing
(the processes' own timing is the machine's, so two runs differ in detail, not in kind).
"""

import asyncio
import contextlib
import logging
import os
import random
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import nats.errors

from allot.bus.server import Backoff, EmbeddedNats
from allot.client.chaos_check import Verdict, check
from allot.client.client import AsyncClient
from allot.client.logfile import export_log, read_log
from allot.client.replay import all_records
from allot.client.sending import CommandError, NoAnswer
from allot.client.stack import NodeShape, Stack
from allot.proto.events import JobSpec
from allot.services.runtime import code_version

log = logging.getLogger("allot.chaos")

NATS = "nats"
BOTH_PLANNERS = "planners"  # both planner processes at once
# Each kind of process, in the order the schedule first kills them.
KINDS = ("intake", "ledger", "planner", BOTH_PLANNERS, "preemptor", "telemetry", "node", NATS)
S = 10**9
LOG = "chaos-log.jsonl.gz"  # the exported log, in the run's directory
ACKNOWLEDGED = "acknowledged.json"  # idempotency key -> the job id its client was given
SUBMIT_GIVE_UP_S = 90.0  # a CI job's patience with a submission that gets no answer
BACK_WITHIN_S = 60.0  # a killed process not running again by then is a failed recovery
# Restarts soon after each kill, as an operator's supervisor would: the default backoff
# doubles towards 30 s for a process killed again within 30 s, which here is the point.
CHAOS_BACKOFF = Backoff(first_s=0.5, max_s=2.0, stable_s=5.0)

# A checkpointing job: one unit of work per pause, saved after each; resumed, it goes on
# from its latest checkpoint; asked to stop, it exits (its last unit is saved).
CHECKPOINTING = """\
import sys, time
from allot import workload
units, pause = int(sys.argv[1]), float(sys.argv[2])
state = workload.resume() or {"done": 0}
while state["done"] < units:
    if workload.should_stop():
        sys.exit(0)
    time.sleep(pause)
    state = {"done": state["done"] + 1}
    workload.save(state)
"""


class Kill(msgspec.Struct, frozen=True, kw_only=True):
    kind: str
    targets: tuple[str, ...]  # children of the stack, or ``nats``


def kill_schedule(
    seed: int, count: int, nodes: Sequence[str], planners: Sequence[str]
) -> list[Kill]:
    """``count`` kills: each kind once, in the order of ``KINDS``, then kinds at random."""
    rng = random.Random(seed)
    kills = []
    for number in range(count):
        kind = KINDS[number] if number < len(KINDS) else rng.choice(KINDS)
        if kind == "node":
            targets: tuple[str, ...] = (rng.choice(list(nodes)),)
        elif kind == "planner":
            targets = (rng.choice(list(planners)),)
        elif kind == BOTH_PLANNERS:
            targets = tuple(planners)
        else:
            targets = (kind,)
        kills.append(Kill(kind=kind, targets=targets))
    return kills


def job_for(rng: random.Random) -> JobSpec:
    """A short real job: plain (half), checkpointing and resumable (three in ten, the
    lowest tier, so the preempted), or interactive (the preempting)."""
    draw = rng.random()
    if draw < 0.5:
        seconds = round(rng.uniform(0.3, 2.0), 2)
        command = [sys.executable, "-c", f"import time; time.sleep({seconds})"]
        return JobSpec(account="chaos/batch", gpus=rng.choice((1, 2)), command=command)
    if draw < 0.8:
        units, pause = rng.randint(5, 12), 0.3
        return JobSpec(
            account="chaos/train",
            gpus=rng.choice((1, 2)),
            command=[sys.executable, "-c", CHECKPOINTING, str(units), str(pause)],
            tier="best-effort",
            resumable=True,
            grace_ns=5 * S,
            checkpoint_interval_ns=int(pause * S),
        )
    seconds = round(rng.uniform(0.3, 1.5), 2)
    command = [sys.executable, "-c", f"import time; time.sleep({seconds})"]
    return JobSpec(account="chaos/notebook", gpus=rng.choice((1, 2, 4)), command=command,
                   tier="interactive")  # fmt: skip


@dataclass
class Settings:
    seconds: float  # of load and kills
    seed: int = 1
    kill_every_s: float = 4.0
    submit_every_s: float = 1.0
    settle_s: float = 180.0  # for every job to end, after the load
    nodes: int = 2
    gpus_per_node: int = 4


@dataclass
class Outcome:
    kills: dict[str, int] = field(default_factory=dict)  # kind -> kills survived
    not_back: list[str] = field(default_factory=list)  # killed, not running again
    submissions: int = 0
    unacknowledged: int = 0  # given up on by their client: no answer in time
    refused: list[str] = field(default_factory=list)  # refusals that were not "retry"
    settled_in_s: float | None = None  # None: some job had not ended by the deadline
    verdict: Verdict = field(default_factory=Verdict)
    log_path: Path | None = None
    from_snapshot: int = 0  # service starts that began from a snapshot, not sequence 1

    @property
    def passed(self) -> bool:
        return self.verdict.passed and not self.not_back and not self.refused


SNAPSHOT_OFTEN = ("--snapshot-every", "200", "--snapshot-interval", "2")


async def run_chaos(data_dir: Path, settings: Settings) -> Outcome:
    nodes = [
        NodeShape(node_id=f"node-{n}", gpus=settings.gpus_per_node)
        for n in range(1, settings.nodes + 1)
    ]
    stack = Stack(
        data_dir,
        nodes,
        node_timeout_s=10,
        heartbeat_s=0.5,
        stop_grace_s=3,
        planners=2,
        # Snapshots every few hundred events: the restarted services start from them, so the
        # run checks that a state restored mid-run decides as the fold of the whole log.
        planner_args=SNAPSHOT_OFTEN,
    )
    stack.backoff = _server(stack).restart = CHAOS_BACKOFF
    outcome = Outcome()
    await stack.start(timeout=60)
    try:
        load = Load(stack, random.Random(settings.seed), outcome)
        deadline = time.monotonic() + settings.seconds
        async with asyncio.TaskGroup() as group:
            group.create_task(load.run(deadline, settings.submit_every_s))
            group.create_task(_kill_until(stack, settings, deadline, outcome))
        outcome.settled_in_s = await load.settle(settings.settle_s)
        outcome.log_path = data_dir / LOG
        await export_log(all_records((await load.client()).events), outcome.log_path)
        await load.close()
        # Beside the log, what the clients were told: the check can be run again from both.
        (data_dir / ACKNOWLEDGED).write_bytes(msgspec.json.encode(load.acknowledged))
    finally:
        await stack.stop()
    outcome.from_snapshot = starts_from_snapshot(stack.logs)
    records = list(read_log(outcome.log_path))
    outcome.verdict = check(
        records, load.acknowledged, code_version(), ran=started_on_disk(data_dir)
    )
    return outcome


def starts_from_snapshot(logs: Path) -> int:
    """How many times a service began from a stored snapshot, as the services' logs say
    (``allot.services.snapshots``)."""
    said = "starting from the snapshot at sequence"
    return sum(log.read_text(errors="replace").count(said) for log in logs.glob("*.log"))


def started_on_disk(data_dir: Path) -> list[tuple[str, int, str]]:
    """The attempts whose processes the simulated nodes started, as their work directories
    show: a ``pid``, or an ``exit_code`` that only a process that ran writes
    (``WORK/jobs/<job id>/<attempt>/``, ``allot.services.node.process``)."""
    attempts = []
    for attempt_dir in sorted(data_dir.glob("nodes/*/jobs/*/*")):
        if (attempt_dir / "pid").exists() or (attempt_dir / "exit_code").exists():
            node_id = attempt_dir.parents[2].name
            attempts.append((attempt_dir.parent.name, int(attempt_dir.name), node_id))
    return attempts


async def _kill_until(stack: Stack, settings: Settings, deadline: float, outcome: Outcome) -> None:
    planners = sorted(name for name in stack.children if name.startswith("planner"))
    count = int(settings.seconds // settings.kill_every_s) + 1
    schedule = kill_schedule(settings.seed, count, [n.node_id for n in stack.nodes], planners)
    for kill in schedule:
        await asyncio.sleep(settings.kill_every_s)
        if time.monotonic() >= deadline:
            return
        before = {target: _pid(stack, target) for target in kill.targets}
        for target, pid in before.items():
            if pid is not None:
                log.info("kill -9 %s (pid %d)", target, pid)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        back = await _all_back(stack, before)
        if back:
            outcome.kills[kill.kind] = outcome.kills.get(kill.kind, 0) + 1
        else:
            outcome.not_back += [t for t in kill.targets if t not in outcome.not_back]


def _pid(stack: Stack, target: str) -> int | None:
    """The running process of a child, or of the NATS server; None if none runs now."""
    if target == NATS:
        with contextlib.suppress(OSError, ValueError):
            pid = int(_server(stack).pid_path.read_text())
            return pid if _alive(pid) else None
        return None
    process = stack.children[target].process
    return process.pid if process is not None and process.returncode is None else None


def _server(stack: Stack) -> EmbeddedNats:
    """The stack's one NATS server: the chaos run kills it, and its supervisor restarts it
    on the same port and store (a cluster's loss of a server is tests/fault's own test)."""
    assert isinstance(stack.nats, EmbeddedNats), "the chaos run uses one NATS server"
    return stack.nats


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def _all_back(stack: Stack, before: dict[str, int | None]) -> bool:
    """Wait until every target runs again, as a new process."""
    limit = time.monotonic() + BACK_WITHIN_S
    while time.monotonic() < limit:
        now = {target: _pid(stack, target) for target in before}
        if all(pid is not None and pid != before[t] for t, pid in now.items()):
            return True
        await asyncio.sleep(0.1)
    return False


class Load:
    """Submissions, one every so often, each retried until acknowledged or given up."""

    def __init__(self, stack: Stack, rng: random.Random, outcome: Outcome):
        self.stack = stack
        self.rng = rng
        self.outcome = outcome
        self.acknowledged: dict[str, str] = {}  # idempotency key -> job id
        self._client: AsyncClient | None = None
        self._connecting = asyncio.Lock()

    async def client(self) -> AsyncClient:
        """The connection, made again if the last one gave up during an outage."""
        async with self._connecting:
            if self._client is None or self._client.events.nc.is_closed:
                self._client = await self.stack.client()
            return self._client

    async def close(self) -> None:
        if self._client is not None:
            with contextlib.suppress(Exception):
                await self._client.close()

    async def run(self, deadline: float, every_s: float) -> None:
        async with asyncio.TaskGroup() as group:
            number = 0
            while time.monotonic() < deadline:
                key = f"chaos-{number}"
                group.create_task(self.submit(key, job_for(self.rng)))
                number += 1
                await asyncio.sleep(every_s * self.rng.uniform(0.5, 1.5))

    async def submit(self, key: str, spec: JobSpec) -> None:
        self.outcome.submissions += 1
        give_up = time.monotonic() + SUBMIT_GIVE_UP_S
        pause = 0.2
        while time.monotonic() < give_up:
            try:
                client = await self.client()
                reply = await client.submit(spec, idempotency_key=key, timeout=3, attempts=1)
            except CommandError as error:
                if any(e.field != "log" for e in error.errors):
                    self.outcome.refused.append(f"{key}: {error}")
                    return
            except (NoAnswer, nats.errors.Error, OSError, TimeoutError) as error:
                log.info("%s: %s; retrying", key, error)
            else:
                assert reply.job_id is not None
                self.acknowledged[key] = reply.job_id
                return
            await asyncio.sleep(pause)
            pause = min(2.0, pause * 2)
        self.outcome.unacknowledged += 1

    async def settle(self, within_s: float) -> float | None:
        """Wait until every job in the log has ended; how long that took (None: not all
        had by ``within_s``)."""
        started = time.monotonic()
        while time.monotonic() - started < within_s:
            with contextlib.suppress(NoAnswer, nats.errors.Error, OSError, TimeoutError):
                state = await (await self.client()).state()
                if all(job.status.terminal for job in state.jobs.values()):
                    return time.monotonic() - started
            await asyncio.sleep(2)
        return None
