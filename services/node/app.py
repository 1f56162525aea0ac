"""The node agent's loop: whenever the log has been read to its end, make this host match it.

- a job admitted here and not started: start it (or, if an earlier agent had started it,
  adopt the process and report the start);
- a job running here that this agent does not watch (it restarted): adopt the live process,
  or report the exit status the supervisor left, or report it vanished;
- a cancel requested: SIGTERM to the process group, SIGKILL after the grace period;
- a local process the log no longer gives to this node (lost node, requeued): kill it.
Starts and exits are appended with message ids per job attempt, so a retry after a crash
appends nothing twice.
"""

import argparse
import asyncio
import contextlib
import logging
import signal
import socket
from pathlib import Path

import msgspec
from allot.bus.eventlog import EventLog
from allot.core import JobRecord, JobStatus, State
from allot.proto.events import GpuInfo, JobCancelled, JobExited, JobStarted, NodeRegistered
from allot.proto.subjects import heartbeat
from allot.services.node import process
from allot.services.node.process import JobDir
from allot.services.runtime import Clock, follow_state, stamp

log = logging.getLogger("allot.node")


class Heartbeat(msgspec.Struct, frozen=True, kw_only=True):
    node_id: str
    at: int
    running: int


class NodeAgent:
    def __init__(
        self,
        events: EventLog,
        node_id: str,
        gpus: list[GpuInfo],
        work_dir: Path,
        heartbeat_s: float = 1.0,
        stop_grace_s: float = 10.0,
        clock: Clock | None = None,
    ):
        self.events = events
        self.node_id = node_id
        self.gpus = gpus
        self.work_dir = work_dir
        self.heartbeat_s = heartbeat_s
        self.stop_grace_s = stop_grace_s
        self.clock = clock or Clock()
        self.state = State()
        self._watched: dict[str, asyncio.Task[None]] = {}  # job id -> task that owns its process
        self._stopping: set[str] = set()
        self._revoked: set[str] = set()  # jobs the log took away from this node
        self._first_pass = True
        self._lost_registration: int | None = None  # registration a loss was answered for

    async def run(self) -> None:
        await self._register()
        beating = asyncio.create_task(self._heartbeat())
        try:
            await follow_state(self.events, self.state, self.reconcile)
        finally:
            beating.cancel()

    async def _register(self) -> None:
        registered = NodeRegistered(
            meta=stamp(self.node_id, self.clock),
            node_id=self.node_id,
            hostname=socket.gethostname(),
            gpus=self.gpus,
        )
        await self.events.append(registered)

    async def _heartbeat(self) -> None:
        while True:
            beat = Heartbeat(node_id=self.node_id, at=self.clock.now(), running=len(self._watched))
            with contextlib.suppress(Exception):
                await self.events.nc.publish(heartbeat(self.node_id), msgspec.json.encode(beat))
            await asyncio.sleep(self.heartbeat_s)

    def _mine(self) -> list[JobRecord]:
        node = self.state.nodes.get(self.node_id)
        if node is None or node.lost:
            return []
        return [self.state.jobs[j] for j in sorted(set(node.allocated.values()))]

    async def reconcile(self) -> None:
        mine = self._mine()
        node = self.state.nodes.get(self.node_id)
        if node is not None and node.lost and self._lost_registration != node.registered_at:
            # Declared lost while alive (a stall, a partition): the log has already ended or
            # requeued this node's jobs, so their processes are killed below; then the node
            # offers itself again.
            self._lost_registration = node.registered_at
            log.warning("this node was declared lost; registering again")
            await self._register()
        for job in mine:
            if job.job_id in self._watched:
                if job.cancel_requested and job.job_id not in self._stopping:
                    self._stop(job)
                continue
            job_dir = JobDir(self.work_dir, job.job_id, job.attempts)
            if job.status == JobStatus.ADMITTED and job.cancel_requested and job_dir.pid() is None:
                await self.events.append(
                    JobCancelled(
                        meta=stamp(self.node_id, self.clock),
                        job_id=job.job_id,
                        node_id=self.node_id,
                    ),
                    msg_id=f"{job.job_id}:{job.attempts}:cancelled",
                )
                continue
            self._watched[job.job_id] = asyncio.create_task(self._own(job, job_dir))
        wanted = {job.job_id for job in mine}
        for job_id in sorted(set(self._watched) - wanted):
            self._revoked.add(job_id)
            self._watched.pop(job_id).cancel()  # _own kills the process as it unwinds
        if self._first_pass:
            self._first_pass = False
            self._kill_orphans(wanted)

    def _stop(self, job: JobRecord) -> None:
        self._stopping.add(job.job_id)
        pid = JobDir(self.work_dir, job.job_id, job.attempts).pid()
        if pid is None:
            return
        log.info("stopping %s (pid %d): cancel requested", job.job_id, pid)
        process.signal_group(pid, signal.SIGTERM)
        asyncio.get_running_loop().call_later(
            self.stop_grace_s, process.signal_group, pid, signal.SIGKILL
        )

    async def _own(self, job: JobRecord, job_dir: JobDir) -> None:
        """Start or adopt the job's process, report the start, wait, report the exit."""
        handle: asyncio.subprocess.Process | None = None
        pid = job_dir.pid()
        try:
            if pid is None and job.status == JobStatus.RUNNING:
                await self._report_exit(job, job_dir, None, "no trace of its process on this node")
                return
            if pid is None:
                handle = await process.launch(job, job_dir, job.gpus, self.node_id)
                pid = handle.pid
                log.info("started %s on GPUs %s (pid %d)", job.job_id, job.gpus, pid)
            else:
                log.info("adopting %s (pid %d) from an earlier agent", job.job_id, pid)
            if job.status == JobStatus.ADMITTED:
                started = JobStarted(
                    meta=stamp(self.node_id, self.clock),
                    job_id=job.job_id,
                    node_id=self.node_id,
                    gpus=job.gpus,
                    pid=pid,
                    output_path=str(job_dir.output),
                )
                await self.events.append(started, msg_id=f"{job.job_id}:{job_dir.attempt}:started")
            if job.cancel_requested:
                self._stop(job)
            code = await process.wait_exit(pid, job_dir, handle)
            reason = "" if code is not None else "the process vanished without an exit status"
            await self._report_exit(job, job_dir, code, reason)
        except asyncio.CancelledError:
            # Revoked: nothing of the job may keep running. Otherwise the agent is shutting
            # down, and the job runs on for the next agent to adopt.
            if pid is not None and job.job_id in self._revoked:
                log.warning("killing %s (pid %d): no longer assigned here", job.job_id, pid)
                process.signal_group(pid, signal.SIGKILL)
            raise
        finally:
            self._stopping.discard(job.job_id)
            self._revoked.discard(job.job_id)
            if self._watched.get(job.job_id) is asyncio.current_task():
                del self._watched[job.job_id]

    async def _report_exit(
        self, job: JobRecord, job_dir: JobDir, code: int | None, reason: str
    ) -> None:
        exited = JobExited(
            meta=stamp(self.node_id, self.clock),
            job_id=job.job_id,
            node_id=self.node_id,
            exit_code=code,
            output_path=str(job_dir.output),
            reason=reason,
        )
        await self.events.append(exited, msg_id=f"{job.job_id}:{job_dir.attempt}:exited")
        log.info("%s exited with %s", job.job_id, code)

    def _kill_orphans(self, wanted: set[str]) -> None:
        """After a restart: processes an earlier agent left for jobs the cluster gave up on."""
        for pid_file in sorted((self.work_dir / "jobs").glob("*/*/pid")):
            job_dir = pid_file.parent
            if job_dir.parent.name in wanted or (job_dir / "exit_code").exists():
                continue
            with contextlib.suppress(ValueError, OSError):
                pid = int(pid_file.read_text())
                if process.alive(pid):
                    log.warning("killing orphan %s (pid %d)", job_dir.parent.name, pid)
                    process.signal_group(pid, signal.SIGKILL)


def simulated_gpus(count: int, model: str, memory_mib: int) -> list[GpuInfo]:
    return [GpuInfo(index=i, model=model, memory_mib=memory_mib) for i in range(count)]


async def serve(args: argparse.Namespace, events: EventLog) -> None:
    agent = NodeAgent(
        events,
        node_id=args.node_id,
        gpus=simulated_gpus(args.gpus, args.gpu_model, args.gpu_memory_mib),
        work_dir=args.work_dir,
        heartbeat_s=args.heartbeat,
        stop_grace_s=args.stop_grace,
    )
    await agent.run()
