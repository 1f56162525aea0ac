"""The node agent's loop: whenever the log has been read to its end, make this host match it.

- a job admitted here and not started: start it (or, if an earlier agent had started it,
  adopt the process and report the start);
- a job running here that this agent does not watch (it restarted): adopt the live process,
  or report the exit status the supervisor left, or report it vanished;
- a cancel requested: SIGTERM to the process group, SIGKILL after the grace period;
- a local process the log no longer gives to this node (lost node, requeued): kill it.
Once it has read the log, it also answers requests for the output of the jobs it ran
(``allot.services.node.output``). Starts and exits are appended with message ids per job
attempt, so a retry after a crash appends nothing twice.
"""

import argparse
import asyncio
import contextlib
import copy
import logging
import os
import signal
import socket
import subprocess
from pathlib import Path

import msgspec

from allot import workload
from allot.bus.eventlog import EventLog
from allot.bus.identity import load
from allot.bus.tracing import JobTraces
from allot.core import JobRecord, JobStatus, State
from allot.proto import msgids
from allot.proto.events import (
    Event,
    JobCancelled,
    JobCheckpointed,
    JobExited,
    JobStarted,
    NodeRegistered,
)
from allot.proto.subjects import heartbeat, is_id, samples
from allot.proto.telemetry import Heartbeat, Samples
from allot.services.node import process
from allot.services.node.gpuwatch import GpuWatch
from allot.services.node.nvml import Gpus, Inventory, Unavailable
from allot.services.node.output import OutputServer
from allot.services.node.process import JobDir
from allot.services.node.simnvml import FaultFile, simulated_host
from allot.services.runtime import Clock, event_span, follow_state, stamp

log = logging.getLogger("allot.node")

SIMULATED_CPUS = 64
SIMULATED_MEMORY_MIB = 1 << 20


class Host(msgspec.Struct, frozen=True, kw_only=True):
    """What a node offers besides its GPUs."""

    cpus: int = 0
    memory_mib: int = 0
    labels: dict[str, str] = {}


class NodeAgent:
    def __init__(
        self,
        events: EventLog,
        node_id: str,
        host: Host,
        gpus: GpuWatch,
        work_dir: Path,
        heartbeat_s: float = 1.0,
        stop_grace_s: float = 10.0,
        clock: Clock | None = None,
        checkpoint_root: Path | None = None,
    ):
        self.events = events
        self.node_id = node_id
        self.host = host
        self.gpus = gpus
        self.inventory: Inventory | None = None  # read as the agent starts
        self.work_dir = work_dir
        self.checkpoint_root = checkpoint_root or work_dir / "checkpoints"
        self.heartbeat_s = heartbeat_s
        self.stop_grace_s = stop_grace_s
        self.clock = clock or Clock()
        self.state = State()
        self.traces = JobTraces()
        self._watched: dict[str, JobWatch] = {}  # job id -> the attempt running here
        self._first_pass = True
        self._lost_registration: int | None = None  # registration a loss was answered for
        self._output: OutputServer | None = None  # serves job output once the log is read

    async def run(self) -> None:
        try:
            self.inventory = await self.gpus.open()
        except Unavailable as error:
            log.error("%s; pass --gpus N to simulate N GPUs", error)
            raise SystemExit(2) from None
        loops: list[asyncio.Task[None]] = []
        try:
            self._uuids = {gpu.index: gpu.uuid for gpu in self.inventory.gpus}
            await self._register()
            loops += [
                asyncio.create_task(loop())
                for loop in (self._heartbeat, self._checkpoints, self._sample)
            ]
            await follow_state(
                self.events, self.state, self.reconcile, note=self.traces.note, snapshot=True
            )
        finally:
            for loop in loops:
                loop.cancel()
            await asyncio.shield(asyncio.to_thread(self.gpus.close))

    async def _register(self) -> None:
        assert self.inventory is not None
        registered = NodeRegistered(
            meta=stamp(self.node_id, self.clock),
            node_id=self.node_id,
            hostname=socket.gethostname(),
            gpus=self.inventory.gpus,
            cpus=self.host.cpus,
            memory_mib=self.host.memory_mib,
            simulated=self.gpus.simulated,
            labels=self.host.labels,
            nvlink_islands=self.inventory.nvlink_islands,
            problems=self.inventory.problems,
        )
        await self.events.append(registered)

    async def _heartbeat(self) -> None:
        """A sign of life with the faults the GPUs show now: what the watch last read, so
        a GPU that hangs NVML never holds it back."""
        while True:
            beat = Heartbeat(
                node_id=self.node_id,
                at=self.clock.now(),
                running=len(self._watched),
                faults=self.gpus.faults(),
            )
            with contextlib.suppress(Exception):
                await self.events.nc.publish(heartbeat(self.node_id), msgspec.json.encode(beat))
            await asyncio.sleep(self.heartbeat_s)

    async def _sample(self) -> None:
        """Each GPU's load, outside the log, for the metrics service."""
        while True:
            taken = Samples(node_id=self.node_id, at=self.clock.now(), gpus=self.gpus.samples())
            if taken.gpus:
                with contextlib.suppress(Exception):
                    await self.events.nc.publish(samples(self.node_id), msgspec.json.encode(taken))
            await asyncio.sleep(self.gpus.sample_s)

    async def _checkpoints(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_s)
            try:
                await self._report_checkpoints()
            except Exception:  # a vanished directory, a bad file: try again next time
                log.exception("checking checkpoints failed")

    def _mine(self) -> list[JobRecord]:
        node = self.state.nodes.get(self.node_id)
        if node is None or node.lost:
            return []
        jobs = [self.state.jobs[j] for j in sorted(set(node.allocated.values()))]
        # A gang's process that ended here while others run on: nothing more to do here.
        return [job for job in jobs if self.node_id not in job.exited_on]

    async def reconcile(self) -> None:
        mine = self._mine()
        node = self.state.nodes.get(self.node_id)
        self.gpus.acknowledge(node)
        if node is not None and node.lost and self._lost_registration != node.registered_at:
            # Declared lost while alive (a stall, a partition): the log has already ended or
            # requeued this node's jobs, so their processes are killed below; then the node
            # offers itself again.
            self._lost_registration = node.registered_at
            log.warning("this node was declared lost; registering again")
            await self._register()
        for job in mine:
            watch = self._watched.get(job.job_id)
            if watch is not None and watch.attempt == job.attempts:
                if job.cancel_requested:
                    self._stop(watch)
                elif job.stop is not None:
                    self._terminate(watch)
                if job.kill_requested:
                    self._kill(watch)
                continue
            if watch is not None:  # an earlier attempt still here
                self._revoke(self._watched.pop(job.job_id))
            job_dir = self._job_dir(job)
            stopped = job.cancel_requested or job.stop is not None
            if stopped and not job_dir.launching and self.node_id not in job.started_on:
                await self._cancel_unstarted(job)
                continue
            # A copy: the fold goes on changing the record while the watch awaits.
            watch = JobWatch(copy.copy(job), job_dir)
            watch.stopping = job.cancel_requested or job.stop is not None
            watch.task = asyncio.create_task(self._own(watch))
            self._watched[job.job_id] = watch
        wanted = {job.job_id for job in mine}
        for job_id in sorted(set(self._watched) - wanted):
            self._revoke(self._watched.pop(job_id))
        if self._first_pass:
            self._first_pass = False
            self._kill_orphans({self._job_dir(j).path for j in mine})
        if self._output is None:
            # Only now: before, the agent would refuse jobs it has not read of yet.
            output = OutputServer(self.node_id, self.work_dir, self.state, self._process_ended)
            await output.subscribe(self.events.nc)
            self._output = output

    def _process_ended(self, job_id: str, attempt: int) -> bool:
        """Whether the process of ``job_id``'s ``attempt`` here has exited (or never ran)."""
        watch = self._watched.get(job_id)
        if watch is not None and watch.attempt == attempt:
            return watch.ended
        job_dir = JobDir(self.work_dir, job_id, attempt, self.checkpoint_root)
        if job_dir.exit_code() is not None:
            return True
        pid = job_dir.pid()
        return pid is None or not process.alive(pid)

    async def _cancel_unstarted(self, job: JobRecord) -> None:
        """A cancelled or stopped job whose process never started here is not started at
        all. If a gang's other nodes already run it, this node reports its part as ended."""
        event: Event
        if job.status == JobStatus.ADMITTED:
            event = JobCancelled(
                meta=stamp(self.node_id, self.clock),
                job_id=job.job_id,
                node_id=self.node_id,
                attempt=job.attempts,
            )
            await self._append(
                event, msgids.node_report(job.job_id, job.attempts, self.node_id, "cancelled")
            )
            return
        event = JobExited(
            meta=stamp(self.node_id, self.clock),
            job_id=job.job_id,
            node_id=self.node_id,
            exit_code=None,
            output_path="",
            reason="stopped before it started here",
            attempt=job.attempts,
            stopped_in_ns=0,
        )
        await self._append(
            event, msgids.node_report(job.job_id, job.attempts, self.node_id, "exited")
        )

    def _job_dir(self, job: JobRecord) -> JobDir:
        return JobDir(self.work_dir, job.job_id, job.attempts, self.checkpoint_root)

    def _terminate(self, watch: "JobWatch") -> None:
        """SIGTERM for a stop the log asked for: the job checkpoints and exits within its
        grace period, or the preemptor asks for SIGKILL (``KillRequested``)."""
        self._sigterm(watch, "stop requested")

    def _sigterm(self, watch: "JobWatch", why: str) -> bool:
        """SIGTERM now, or as soon as the process exists (``_own`` signals a stopping job
        at its start); whether it was sent now."""
        watch.stopping = True
        if watch.signalled or watch.ended or watch.pid is None:
            return False
        watch.signalled = True
        watch.signalled_at = self.clock.monotonic()
        log.info("stopping %s (pid %d): %s", watch.job.job_id, watch.pid, why)
        process.signal_group(watch.pid, signal.SIGTERM)
        return True

    def _kill(self, watch: "JobWatch") -> None:
        if not watch.ended and watch.pid is not None:
            log.warning(
                "killing %s (pid %d): its grace period is over", watch.job.job_id, watch.pid
            )
            process.signal_group(watch.pid, signal.SIGKILL)

    async def _report_checkpoints(self) -> None:
        """Record each new checkpoint of the jobs this node leads. The files outlive the
        agent and the log says which was recorded last, so a restart neither repeats nor
        misses one."""
        for watch in list(self._watched.values()):
            await self._report_checkpoint(watch)

    async def _report_checkpoint(self, watch: "JobWatch") -> None:
        job = self.state.jobs.get(watch.job.job_id)
        if job is None or not job.placements or next(iter(job.placements)) != self.node_id:
            return
        found = workload.checkpoints(watch.job_dir.checkpoints)
        if not found or found[-1][0] <= max(job.checkpoint_step, watch.reported_step):
            return
        step, path = found[-1]
        event = JobCheckpointed(
            meta=stamp(self.node_id, self.clock),
            job_id=job.job_id,
            node_id=self.node_id,
            path=str(path),
            step=step,
        )
        await self._append(event, msgids.checkpoint(job.job_id, step))
        watch.reported_step = step

    def _revoke(self, watch: "JobWatch") -> None:
        """The log no longer gives this attempt to this node: nothing of it may keep running.
        An attempt whose process has already ended is left to finish its report."""
        if not watch.ended:
            watch.revoked = True
            watch.task.cancel()  # _own kills the process group as it unwinds

    def _stop(self, watch: "JobWatch") -> None:
        """For a cancel: SIGTERM now (or as soon as the process exists), SIGKILL after the
        grace period."""
        if self._sigterm(watch, "cancel requested"):
            assert watch.pid is not None
            watch.kill_timer = asyncio.get_running_loop().call_later(
                self.stop_grace_s, process.signal_group, watch.pid, signal.SIGKILL
            )

    async def _own(self, watch: "JobWatch") -> None:
        """Start or adopt the attempt's process, report the start, wait, report the exit."""
        job, job_dir = watch.job, watch.job_dir
        handle: asyncio.subprocess.Process | None = None
        watch.pid = job_dir.pid()
        try:
            if watch.pid is None and job_dir.launching:
                await self._report_exit(watch, None, "its agent stopped while starting it")
                return
            if watch.pid is None and self.node_id in job.started_on:
                await self._report_exit(watch, None, "no trace of its process on this node")
                return
            if watch.pid is None:
                try:
                    handle = await process.launch(job, job_dir, self._job_env(job))
                except (OSError, ValueError, subprocess.SubprocessError) as error:
                    await self._report_exit(watch, None, f"could not start: {error}")
                    return
                watch.pid = handle.pid
                gpus = job.placements[self.node_id]
                log.info("started %s on GPUs %s (pid %d)", job.job_id, gpus, watch.pid)
            else:
                log.info("adopting %s (pid %d) from an earlier agent", job.job_id, watch.pid)
            if watch.stopping:
                current = self.state.jobs.get(job.job_id)
                if (
                    current is not None
                    and current.stop is not None
                    and not current.cancel_requested
                ):
                    self._terminate(watch)
                else:
                    self._stop(watch)
            if self.node_id not in job.started_on:
                gpus = job.placements[self.node_id]
                started = JobStarted(
                    meta=stamp(self.node_id, self.clock),
                    job_id=job.job_id,
                    node_id=self.node_id,
                    gpus=gpus,
                    pid=watch.pid,
                    output_path=str(job_dir.output),
                    attempt=watch.attempt,
                    gpu_uuids=self._uuids_of(gpus),
                )
                await self._append(
                    started, msgids.node_report(job.job_id, watch.attempt, self.node_id, "started")
                )
            code = await process.wait_exit(watch.pid, job_dir, handle)
            watch.ended = True
            with contextlib.suppress(Exception):  # the checkpoint a stopped job saved last
                await self._report_checkpoint(watch)
            if watch.kill_timer is not None:
                watch.kill_timer.cancel()
            reason = "" if code is not None else "the process vanished without an exit status"
            await self._report_exit(watch, code, reason)
        except asyncio.CancelledError:
            # Revoked: kill. Otherwise the agent is shutting down, and the job runs on for
            # the next agent to adopt.
            if watch.revoked and watch.pid is not None:
                log.warning("killing %s (pid %d): no longer assigned here", job.job_id, watch.pid)
                process.signal_group(watch.pid, signal.SIGKILL)
            raise
        finally:
            if self._watched.get(job.job_id) is watch:
                del self._watched[job.job_id]

    async def _report_exit(self, watch: "JobWatch", code: int | None, reason: str) -> None:
        watch.ended = True
        stopped_in = None
        if watch.signalled_at is not None:
            stopped_in = int((self.clock.monotonic() - watch.signalled_at) * 1e9)
        exited = JobExited(
            meta=stamp(self.node_id, self.clock),
            job_id=watch.job.job_id,
            node_id=self.node_id,
            exit_code=code,
            output_path=str(watch.job_dir.output),
            reason=reason,
            attempt=watch.attempt,
            stopped_in_ns=stopped_in,
        )
        await self._append(
            exited, msgids.node_report(watch.job.job_id, watch.attempt, self.node_id, "exited")
        )
        log.info("%s exited with %s %s", watch.job.job_id, code, reason)

    def _uuids_of(self, gpus: list[int]) -> list[str]:
        """The devices' UUIDs, where every one is known; else none."""
        uuids = [self._uuids.get(g, "") for g in gpus]
        return uuids if all(uuids) else []

    def _job_env(self, job: JobRecord) -> dict[str, str]:
        """What the job's process is told; ValueError where a real host cannot name one
        of its devices (the job is then not started, and its exit says why)."""
        lead = self.state.nodes.get(next(iter(job.placements)))
        gpus = job.placements[self.node_id]
        # CUDA numbers GPUs its own way (fastest first), NVML by PCI bus, and a MIG
        # instance has no number at all: on a real host the job is shown its devices by
        # UUID, never by a number that could be another device. Simulated devices have
        # nothing behind them, so indices do.
        if self.gpus.simulated:
            devices = process.device_env(gpus, [])
        else:
            unknown = [g for g in gpus if not self._uuids.get(g)]
            if unknown:
                raise ValueError(f"this host has no device {unknown} that it could name")
            devices = process.device_env(gpus, self._uuids_of(gpus))
        gang = process.gang_env(job, self.node_id, lead.hostname if lead else "")
        array = self.state.arrays.get(job.array_id) if job.array_id is not None else None
        return {**gang, **process.array_env(job, array), **devices}

    async def _append(self, event: Event, msg_id: str) -> None:
        """Append until it is stored: a report must not be lost to a passing NATS hiccup.
        The message id makes every retry harmless."""
        delay = 0.1
        while True:
            try:
                with event_span("node", self.state, self.traces, event):
                    await self.events.append(event, msg_id=msg_id)
                return
            except Exception as error:
                log.warning("append of %s failed (%s); retrying in %.1fs", msg_id, error, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    def _kill_orphans(self, wanted: set[Path]) -> None:
        """After a restart: processes an earlier agent left for attempts the cluster gave up
        on. An attempt with an exit status has nothing left: its supervisor cleaned up."""
        for pid_file in sorted((self.work_dir / "jobs").glob("*/*/pid")):
            job_dir = pid_file.parent
            if job_dir in wanted or (job_dir / "exit_code").exists():
                continue
            with contextlib.suppress(ValueError, OSError):
                pid = int(pid_file.read_text())
                if process.alive(pid):
                    log.warning("killing orphan %s (pid %d)", job_dir, pid)
                    process.signal_group(pid, signal.SIGKILL)


class JobWatch:
    """One attempt of one job on this node, and the task that owns its process."""

    def __init__(self, job: JobRecord, job_dir: JobDir):
        self.job = job
        self.job_dir = job_dir
        self.attempt = job_dir.attempt
        self.task: asyncio.Task[None]
        self.pid: int | None = None
        self.stopping = False  # a stop was asked for
        self.signalled = False  # SIGTERM was sent
        self.signalled_at: float | None = None  # when, on the agent's monotonic clock
        self.reported_step = 0  # the last checkpoint this agent recorded
        self.ended = False  # the process is gone; only its report may be pending
        self.revoked = False
        self.kill_timer: asyncio.TimerHandle | None = None


def parse_islands(text: str | None, gpus: int) -> list[list[int]]:
    """``"0-3,4-7"`` -> [[0, 1, 2, 3], [4, 5, 6, 7]]; none given: one island of all GPUs."""
    if not text:
        return [list(range(gpus))]
    islands: list[list[int]] = []
    for part in text.split(","):
        first, _, last = part.partition("-")
        island = list(range(int(first), int(last or first) + 1))
        if not island or island[-1] >= gpus:
            raise ValueError(f"--nvlink-islands {text!r}: GPU indices are 0..{gpus - 1}")
        islands.append(island)
    flat = [g for island in islands for g in island]
    if len(flat) != len(set(flat)):
        raise ValueError(f"--nvlink-islands {text!r}: a GPU is in two islands")
    return islands


def gpus_of(args: argparse.Namespace) -> GpuWatch:
    """Simulated GPUs where ``--gpus`` says how many; else this host's, through NVML."""
    cadence = {"poll_s": args.heartbeat, "sample_s": args.sample_interval}
    if args.gpus is None:
        return GpuWatch(Gpus(), simulated=False, **cadence)
    nvml = simulated_host(
        args.node_id,
        args.gpus,
        args.gpu_model,
        args.gpu_memory_mib,
        parse_islands(args.nvlink_islands, args.gpus),
    )
    faults = FaultFile(args.simulated_faults, nvml) if args.simulated_faults else None
    return GpuWatch(Gpus(nvml), simulated=True, fault_file=faults, **cadence)


def host_of(args: argparse.Namespace) -> Host:
    """The CPUs and memory given; else a simulated node's defaults, or this host's."""
    if args.gpus is not None:
        cpus, memory = SIMULATED_CPUS, SIMULATED_MEMORY_MIB
    else:
        cpus = len(os.sched_getaffinity(0))
        memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") >> 20
    return Host(
        cpus=args.cpus if args.cpus is not None else cpus,
        memory_mib=args.memory_mib if args.memory_mib is not None else memory,
        labels=dict(item.split("=", 1) for item in args.label),
    )


def node_id_of(args: argparse.Namespace) -> str:
    """The node id given; else the node the identity is for; else this host's short name."""
    node_id = args.node_id
    if node_id is None and args.identity is not None:
        node_id = load(args.identity).node_id
    node_id = node_id or socket.gethostname().split(".")[0]
    if not is_id(node_id):
        raise SystemExit(f"allot-node: {node_id!r} cannot be a node id: pass --node-id")
    return node_id


async def serve(args: argparse.Namespace, events: EventLog) -> None:
    args.node_id = node_id_of(args)
    agent = NodeAgent(
        events,
        node_id=args.node_id,
        host=host_of(args),
        gpus=gpus_of(args),
        work_dir=args.work_dir,
        heartbeat_s=args.heartbeat,
        stop_grace_s=args.stop_grace,
        checkpoint_root=args.checkpoint_root,
    )
    await agent.run()
