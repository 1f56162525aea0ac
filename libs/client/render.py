"""Human-readable tables and JSON views of the folded state.

The planner and the fold are loaded only by the views that plan or fold (``queue_rows``,
``explain``, ``runs_on``): a command that shows one job starts without them."""

import datetime
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from allot.core.arrays import text as indices_text
from allot.core.budgets import MS_PER_HOUR, promised
from allot.core.drain import Fate, fates
from allot.core.durations import format_duration
from allot.core.fairshare import FairSharePolicy, standings
from allot.core.model import ArrayRecord, JobRecord, NodeRecord, State
from allot.proto.events import AccountSettings, JobStarted, PendingReason

if TYPE_CHECKING:
    from allot.bus.eventlog import Record
    from allot.core.owed import OwedDelivered
    from allot.core.planning import Policy, Waiting


def printable(text: str) -> str:
    """What a terminal shows as written: what nodes and users wrote may hold escapes."""
    return text if text.isprintable() else "".join(c if c.isprintable() else "?" for c in text)


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(h) for h in headers], *[[printable(str(c)) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    ]
    return "\n".join(lines)


def human_duration(ns: int, units: int | None = 2) -> str:
    """A length of time as people write it, ``1h23m``: every duration the CLI shows. By
    default the largest two units, for a glance; ``units=None``: exact, as settings are."""
    return format_duration(ns, units)


def when(ns: int | None) -> str:
    """A moment as a date and time of this machine's zone, its offset said:
    ``2026-12-03 15:04:05+00:00`` (a log spans days, and its readers zones)."""
    if ns is None:
        return "-"
    moment = datetime.datetime.fromtimestamp(ns // 10**9, datetime.UTC).astimezone()
    return moment.isoformat(sep=" ", timespec="seconds")


def reason_text(reason: PendingReason | None) -> str:
    if reason is None:
        return "-"
    params = ", ".join(f"{k} {v}" for k, v in sorted(reason.params.items()))
    return f"{reason.code}({params})" if params else reason.code


def placements_text(job: JobRecord) -> str:
    """``n1[0,1] n2[0,1,2,3]``: where the job holds GPUs."""
    return " ".join(f"{node}[{','.join(map(str, gpus))}]" for node, gpus in job.placements.items())


def shape_text(job: JobRecord) -> str:
    """``2x4`` for a gang of two 4-GPU workers, ``2..8`` for an elastic job, else ``4``."""
    spec = job.spec
    if spec.max_gpus is not None:
        return f"{spec.gpus}..{spec.max_gpus}"
    return f"{spec.workers}x{spec.gpus}" if spec.workers > 1 else str(spec.gpus)


def job_view(job: JobRecord) -> dict[str, Any]:
    view: dict[str, Any] = msgspec.to_builtins(job)
    view["status"] = str(job.status)
    return view


# The columns ``allot status`` can show (``--format``): name -> the job's value there.
JOB_COLUMNS: dict[str, Callable[[JobRecord], object]] = {
    "job": lambda j: j.job_id,
    "name": lambda j: j.spec.name or "-",
    "account": lambda j: j.spec.account,
    "user": lambda j: j.submitted_by or "-",
    "tier": lambda j: j.spec.tier,
    "gpus": shape_text,
    "status": lambda j: j.status,
    "placed": lambda j: placements_text(j) or "-",
    "exit": lambda j: "-" if j.exit_code is None else j.exit_code,
    "submitted": lambda j: when(j.submitted_at),
    "started": lambda j: when(j.started_at),
    "ended": lambda j: when(j.ended_at),
    "reason": lambda j: reason_text(j.reason) if j.reason is not None else j.end_reason or "-",
    "attempts": lambda j: j.attempts,
    "preemptions": lambda j: j.preemptions,
}
DEFAULT_JOB_COLUMNS = ("job", "name", "account", "gpus", "status", "placed", "exit", "submitted")


def jobs_table(jobs: Sequence[JobRecord], columns: Sequence[str] = DEFAULT_JOB_COLUMNS) -> str:
    """One row a job, in ``columns`` (names of ``JOB_COLUMNS``)."""
    rows = [[JOB_COLUMNS[c](j) for c in columns] for j in jobs]
    return table([c.upper() for c in columns], rows)


def job_detail(job: JobRecord) -> str:
    lines = [
        f"job        {job.job_id}  ({job.spec.name or 'unnamed'})",
        f"status     {job.status}" + (f"  ({job.end_reason})" if job.end_reason else ""),
        f"account    {job.spec.account}",
        f"gpus       {shape_text(job)} ({job.spec.topology})"
        + (f" on {placements_text(job)}" if job.placements else ""),
        f"command    {' '.join(job.spec.command)}",
        f"submitted  {when(job.submitted_at)}   admitted {when(job.admitted_at)}   "
        f"started {when(job.started_at)}   ended {when(job.ended_at)}",
        f"exit code  {'-' if job.exit_code is None else job.exit_code}",
        f"output     {job.output_path or '-'}",
    ]
    if job.array_id is not None:
        lines.append(f"array      task {job.array_index} of {job.array_id}")
    if job.reason is not None:
        lines.append(f"waiting    {reason_text(job.reason)}")
    if job.preemptions:
        lines.append(
            f"preempted  {job.preemptions} time(s), {job.lost_gpu_ms / 1000:.1f} GPU-s of work lost"
        )
    if job.checkpoint_step:
        lines.append(f"checkpoint {job.checkpoint_step} at {when(job.last_checkpoint_at)}")
    if job.grace_too_short_ns is not None:
        lines.append(
            f"WARNING    its grace period ({human_duration(job.spec.grace_ns, None)}) is too "
            f"short: it needed {human_duration(job.grace_too_short_ns)} and was killed; "
            "raise --grace"
        )
    return "\n".join(lines)


def array_view(state: State, array: ArrayRecord) -> dict[str, Any]:
    """A job array at a glance: what it runs, its indices and how many tasks are in each
    state (``allot status ARRAY``, ``allot explain ARRAY``)."""
    counts: dict[str, int] = {}
    for job_id in array.tasks:
        status = str(state.jobs[job_id].status)
        counts[status] = counts.get(status, 0) + 1
    spec = array.spec
    return {
        "array_id": array.array_id,
        "indices": indices_text(array.array),
        "tasks": len(array.tasks),
        "max_running": array.array.max_running,
        "by_status": dict(sorted(counts.items())),
        "name": spec.name,
        "account": spec.account,
        "tier": spec.tier,
        "gpus": spec.total_gpus,
        "command": spec.command,
        "submitted_at": array.submitted_at,
        "submitted_by": array.submitted_by,
        "cancel_requested": array.cancel_requested,
    }


def array_summary(view: dict[str, Any]) -> str:
    """``array_view`` for people."""
    counts = ", ".join(f"{n} {status}" for status, n in view["by_status"].items())
    cap = f", at most {view['max_running']} at once" if view["max_running"] else ""
    lines = [
        f"array      {view['array_id']}  ({view['name'] or 'unnamed'})",
        f"tasks      {view['tasks']}: indices {view['indices']}{cap}",
        f"status     {counts}" + ("  (cancel requested)" if view["cancel_requested"] else ""),
        f"account    {view['account']}  ({view['tier']}), {view['gpus']} GPUs per task",
        f"command    {' '.join(view['command'])}",
        f"submitted  {when(view['submitted_at'])} by {view['submitted_by'] or '-'}",
    ]
    return "\n".join(lines)


def queue_rows(state: State, now: int, policy: "Policy | None" = None) -> list[dict[str, Any]]:
    """Pending jobs in the order of the planner's ``policy`` (default: the ``allot``
    policy), each with why it waits as the planner sees it now (the figures of the moment
    included), its account's rank and an estimated start where one is known."""
    from allot.core.planning import DEFAULT_POLICY, plan, queue

    policy = DEFAULT_POLICY if policy is None else policy
    ranked = standings(state, now, policy.fair_share)
    decided = plan(state, now, policy, whole_queue=True)
    waiting = {w.reason.job_id: w for w in decided.waiting}
    rows = []
    for position, job in enumerate(queue(state, now, policy), start=1):
        standing = ranked.get(job.spec.account)
        seen = waiting.get(job.job_id)
        start = None if seen is None else seen.detail.get("estimated_start")
        rows.append(
            {
                "position": position,
                "job_id": job.job_id,
                "name": job.spec.name,
                "tier": job.spec.tier,
                "account": job.spec.account,
                "account_rank": None if standing is None else standing.rank,
                "gpus": shape_text(job),
                "queued_at": job.queued_at,
                "waiting_s": max(0, now - job.queued_at) // 10**9,
                "max_wait_exceeded": job.max_wait_exceeded,
                "reason": None if seen is None else msgspec.to_builtins(seen.reason),
                "detail": {} if seen is None else dict(seen.detail),
                "reason_text": "admitted by the next plan" if seen is None else waiting_text(seen),
                "estimated_start": start,
            }
        )
    return rows


def waiting_text(waiting: "Waiting") -> str:
    detail = {k: v for k, v in waiting.detail.items() if k != "estimated_start"}
    text = reason_text(waiting.reason)
    if detail:
        text += "; " + ", ".join(f"{k} {v}" for k, v in sorted(detail.items()))
    return text


def queue_table(rows: list[dict[str, Any]]) -> str:
    lines = [
        [
            r["position"],
            r["job_id"],
            r["name"] or "-",
            r["tier"],
            r["account"],
            "-" if r["account_rank"] is None else r["account_rank"],
            r["gpus"],
            human_duration(r["waiting_s"] * 10**9)
            + (" OVER MAX-WAIT" if r["max_wait_exceeded"] else ""),
            when(r["estimated_start"]),
            r["reason_text"],
        ]
        for r in rows
    ]
    headers = ["POS", "JOB", "NAME", "TIER", "ACCOUNT", "RANK", "GPUS", "WAITING", "EST START"]
    return table([*headers, "REASON"], lines)


def node_view(node: NodeRecord, state: State | None = None) -> dict[str, Any]:
    """A node as JSON, with what keeps work off it (``why``) and what it looks like now
    (``state_text``)."""
    view: dict[str, Any] = msgspec.to_builtins(node)
    view["why"] = why_unavailable(node, state)
    view["state_text"] = node_state(node)
    view["allocated"] = {str(k): v for k, v in sorted(node.allocated.items())}
    view["free_gpus"] = node.free_gpus()
    return view


def nodes_table(nodes: Mapping[str, NodeRecord], why: Mapping[str, str] | None = None) -> str:
    """A row a node; ``why``: what keeps work off each, as ``why_unavailable`` said with the
    whole state at hand (else without it: a drain's jobs by id only)."""
    why = why or {}
    rows = []
    for node_id, node in sorted(nodes.items()):
        model = node.gpus[0].model if node.gpus else "-"
        jobs = sorted(set(node.allocated.values()))
        islands = " ".join(spans(i) for i in node.nvlink_islands if i) or "-"
        labels = ",".join(f"{k}={v}" for k, v in sorted(node.labels.items())) or "-"
        faults = " ".join(f"{g}:{f.kind}" for g, f in sorted(node.gpu_faults.items()))
        rows.append(
            [
                node_id,
                node_state(node),
                model,
                len(node.gpus),
                len(node.free_gpus()),
                islands,
                labels,
                " ".join(jobs) or "-",
                faults or "-",
                why.get(node_id, why_unavailable(node)) or "-",
            ]
        )
    headers = ["NODE", "STATE", "GPU MODEL", "GPUS", "FREE", "NVLINK", "LABELS", "JOBS"]
    return table([*headers, "GPU FAULTS", "WHY"], rows)


def spans(indices: list[int]) -> str:
    """``[0, 1, 2, 3, 6]`` -> ``0-3,6``: an island as it is, gaps shown."""
    runs: list[list[int]] = []
    for index in sorted(indices):
        if runs and index == runs[-1][-1] + 1:
            runs[-1].append(index)
        else:
            runs.append([index])
    return ",".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)


def node_state(node: NodeRecord) -> str:
    if node.lost:
        return "lost"
    state = "healthy" if node.healthy else "unhealthy"
    if node.drained:
        state += ",drained"
    elif node.draining:
        state += ",draining --now" if node.drain_now else ",draining"
    elif node.cordoned:
        state += ",cordoned"
    return state


def why_unavailable(node: NodeRecord, state: State | None = None) -> str:
    """What keeps work off the node: its own fault, then its cordon and who asked; of a
    drain, the jobs it still waits for (with ``state``, what becomes of each)."""
    reasons = []
    if node.fault is not None:
        reasons.append(node.fault.reason)
    if node.cordoned:
        by = f" (by {node.cordoned_by})" if node.cordoned_by else ""
        kind = "cordon" if not node.draining else "drain --now" if node.drain_now else "drain"
        reasons.append(f"{kind}{by}: {node.cordon_reason or '-'}")
    if node.draining and node.allocated:
        if state is None:
            waits = ", ".join(sorted(set(node.allocated.values())))
        else:
            waits = fates_text(fates(state, node.node_id))
        reasons.append(f"waits for {waits}")
    return "; ".join(reasons)


def fates_text(fates: list[Fate]) -> str:
    return ", ".join(f"{fate.job_id} ({fate_text(fate)})" for fate in fates)


def fate_text(fate: Fate) -> str:
    """What the drain of its node will do to a job there."""
    if fate.stopping:
        return "stopping"
    if not fate.stopped:
        end = "no max_runtime" if fate.ends_by is None else f"by {when(fate.ends_by)} at most"
        return f"left to finish, {end}"
    text = "to stop at a checkpoint" if fate.resumable else "to stop, its work lost"
    return text if fate.not_before is None else f"{text}, not before {when(fate.not_before)}"


def drain_losses(fates: list[Fate], now: int) -> list[str]:
    """What a drain that stops these jobs at ``now`` loses, a line per job it stops."""
    lines = []
    for fate in fates:
        if fate.stopping or not fate.stopped:
            continue
        if fate.since is None:
            lines.append(f"{fate.job_id}: not started yet, nothing is lost")
            continue
        lost = human_duration(max(0, now - fate.since))
        if fate.resumable:
            since = "its last checkpoint" if fate.checkpointed else "it started"
            line = f"{fate.job_id}: resumes elsewhere, losing the {lost} since {since}"
        else:
            line = f"{fate.job_id}: cannot resume, its {lost} of work is lost"
        if fate.not_before is not None and fate.not_before > now:
            line += f" (stopped at {when(fate.not_before)}, when its minimum runtime ends)"
        lines.append(printable(line))
    return lines


class GpuRun(msgspec.Struct, frozen=True, kw_only=True):
    """One start of a job attempt on a GPU, as its ``JobStarted`` recorded it."""

    at: int
    job_id: str
    attempt: int
    node_id: str
    device: int
    uuid: str


def runs_on(records: Sequence["Record"], prefix: str) -> tuple[State, list[GpuRun], set[str]]:
    """The log folded, the starts it took on GPUs whose UUID begins with ``prefix`` (oldest
    first), and every such UUID it knows. A start the fold refused (a duplicate, a report
    for a job not on that node) ran nothing, and a UUID is taken only where the node that
    reports it registered that device with it."""
    from allot.core.fold import apply_record

    state, runs = State(), []
    for record in records:
        ignored = len(state.ignored)
        apply_record(state, record, records)
        started = record.event
        if not isinstance(started, JobStarted) or len(state.ignored) > ignored:
            continue
        node = state.nodes.get(started.node_id)
        devices = {gpu.index: gpu.uuid for gpu in node.gpus} if node else {}
        runs += [
            GpuRun(at=started.meta.at, job_id=started.job_id, attempt=started.attempt,
                   node_id=started.node_id, device=device, uuid=uuid)
            for device, uuid in zip(started.gpus, started.gpu_uuids, strict=False)
            if uuid.startswith(prefix) and devices.get(device) == uuid
        ]  # fmt: skip
    known = {run.uuid for run in runs} | {
        gpu.uuid
        for node in state.nodes.values()
        for gpu in node.gpus
        if gpu.uuid and gpu.uuid.startswith(prefix)
    }
    return state, runs, known


def gpu_runs(state: State, runs: list[GpuRun], uuid: str) -> str:
    """The jobs that ran on one GPU, and what the log says of the GPU now."""
    where = [
        (node_id, gpu.index, node.gpu_faults.get(gpu.index))
        for node_id, node in sorted(state.nodes.items())
        for gpu in node.gpus
        if gpu.uuid and gpu.uuid.startswith(uuid)
    ]
    lines = []
    for node_id, index, fault in where:
        health = "healthy" if fault is None else f"unhealthy ({fault.kind}: {fault.reason})"
        lines.append(printable(f"GPU {index} of {node_id}: {health}"))
    if not runs:
        return "\n".join([*lines, printable(f"no job has run on a GPU {uuid}…")])
    rows = []
    for run in runs:
        job = state.jobs.get(run.job_id)
        rows.append([when(run.at), run.job_id, run.attempt, run.node_id, run.device,
                     job.spec.account if job else "-", job.status if job else "-"])  # fmt: skip
    headers = ["STARTED", "JOB", "ATTEMPT", "NODE", "GPU", "ACCOUNT", "NOW"]
    return "\n".join([*lines, table(headers, rows)])


def gpus_table(node: NodeRecord) -> str:
    """Each device of one node: what it is, who holds it, and why it takes no work."""
    rows = []
    for gpu in node.gpus:
        fault = node.gpu_faults.get(gpu.index)
        rows.append(
            [
                gpu.index,
                gpu.model,
                gpu.memory_mib,
                gpu.uuid or "-",
                gpu.pci_bus_id or "-",
                "-" if gpu.parent is None else gpu.parent,
                node.allocated.get(gpu.index, "-"),
                "healthy" if fault is None else f"{fault.kind} since {when(fault.since)}",
                fault.reason if fault is not None else "-",
            ]
        )
    headers = ["GPU", "MODEL", "MEMORY MIB", "UUID", "PCI BUS", "MIG OF", "JOB", "HEALTH"]
    return table([*headers, "REASON"], rows)


def accounts_table(accounts: Mapping[str, AccountSettings]) -> str:
    rows = []
    for path, settings in sorted(accounts.items()):
        depth = path.count("/")
        name = "  " * depth + path.rsplit("/", 1)[-1]
        quota = ", ".join(f"{r} {n}" for r, n in sorted(settings.quota.items())) or "-"
        wait = "-" if settings.max_wait_ns is None else human_duration(settings.max_wait_ns, None)
        rows.append([name, path, settings.weight, quota, wait])
    return table(["ACCOUNT", "PATH", "WEIGHT", "QUOTA", "MAX WAIT"], rows)


def budget_rows(
    state: State, now: int, window_ns: int, fair_share: FairSharePolicy | None = None
) -> list[dict[str, Any]]:
    """Per account: its share among siblings, usage in the window, fair-share level factor
    and rank (decayed usage, the planner's ``fair_share``), and budget left this period,
    with the part of it already promised (``allot.core.budgets.promised``: a job is funded
    only from what is left after that)."""
    ranked = standings(state, now, fair_share or FairSharePolicy())
    promises = promised(state, now)
    windowed = standings(state, now, FairSharePolicy(window_ns=window_ns))
    rows = []
    for path, standing in sorted(ranked.items(), key=lambda item: item[1].rank):
        budget = state.budgets.get(path)
        factor = standing.level_factor
        rows.append(
            {
                "account": path,
                "rank": standing.rank,
                "weight": standing.weight,
                "share": float(standing.share),
                "usage_gpu_hours_in_window": windowed[path].usage_gpu_ms / MS_PER_HOUR,
                "decayed_usage_gpu_hours": standing.usage_gpu_ms / MS_PER_HOUR,
                "level_factor": None if factor is None else float(factor),
                "budget_gpu_hours": None if budget is None else budget.gpu_ms / MS_PER_HOUR,
                "budget_left_gpu_hours": None if budget is None else budget.left(now) / MS_PER_HOUR,
                "budget_promised_gpu_hours": None
                if budget is None
                else promises.get(path, 0) / MS_PER_HOUR,
            }
        )
    # Granted a budget but not yet in the ranking (no tree declared, no job of its own yet):
    # listed all the same, so that a grant shows at once.
    for path, budget in sorted(state.budgets.items()):
        if path not in ranked:
            rows.append(
                {
                    "account": path,
                    "rank": None,
                    "weight": None,
                    "share": None,
                    "usage_gpu_hours_in_window": 0.0,
                    "decayed_usage_gpu_hours": 0.0,
                    "level_factor": None,
                    "budget_gpu_hours": budget.gpu_ms / MS_PER_HOUR,
                    "budget_left_gpu_hours": budget.left(now) / MS_PER_HOUR,
                    "budget_promised_gpu_hours": promises.get(path, 0) / MS_PER_HOUR,
                }
            )
    return rows


def budget_table(rows: list[dict[str, Any]]) -> str:
    def hours(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    lines = [
        [
            "  " * row["account"].count("/") + row["account"].rsplit("/", 1)[-1],
            "-" if row["rank"] is None else row["rank"],
            "-" if row["share"] is None else f"{row['share']:.1%}",
            hours(row["usage_gpu_hours_in_window"]),
            "new" if row["level_factor"] is None else f"{row['level_factor']:.3f}",
            hours(row.get("budget_promised_gpu_hours")),  # a view service before it: none
            hours(row["budget_left_gpu_hours"]),
        ]
        for row in rows
    ]
    headers = ["ACCOUNT", "RANK", "SHARE", "USED GPU-H", "FACTOR", "PROMISED GPU-H"]
    return table([*headers, "BUDGET LEFT GPU-H"], lines)


def owed_table(report: "list[OwedDelivered]") -> str:
    rows = [
        [
            "  " * r.account.count("/") + r.account.rsplit("/", 1)[-1],
            f"{r.share_ppm / 10_000:.1f}%",
            f"{r.demand_gpu_ms / MS_PER_HOUR:.2f}",
            f"{r.owed_gpu_ms / MS_PER_HOUR:.2f}",
            f"{r.delivered_gpu_ms / MS_PER_HOUR:.2f}",
            "-" if r.ratio is None else f"{r.ratio:.0%}",
        ]
        for r in report
    ]
    headers = [
        "ACCOUNT",
        "SHARE",
        "DEMAND GPU-H",
        "OWED GPU-H",
        "DELIVERED GPU-H",
        "DELIVERED/OWED",
    ]
    return table(headers, rows)


def explain(
    state: State,
    job: JobRecord,
    now: int,
    policy: "Policy | None" = None,
    row: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Why a job is where it is: its place and reason while it waits, where and how it
    was admitted, how it ended; and the fair-share numbers of its account, as the planner's
    ``policy`` sees them (default: the ``allot`` policy). ``row``: the job's row of
    ``queue_rows``, if they were made already (else the queue is planned here)."""
    from allot.core.planning import DEFAULT_POLICY

    policy = DEFAULT_POLICY if policy is None else policy
    standing = standings(state, now, policy.fair_share).get(job.spec.account)
    view: dict[str, Any] = {
        "job_id": job.job_id,
        "status": str(job.status),
        "tier": job.spec.tier,
        "account": job.spec.account,
        "submitted_by": job.submitted_by or None,  # None: submitted before identities
        "account_standing": None
        if standing is None
        else {
            "rank": standing.rank,
            "share": float(standing.share),
            "decayed_usage_gpu_hours": standing.usage_gpu_ms / MS_PER_HOUR,
            "level_factor": None if standing.level_factor is None else float(standing.level_factor),
        },
    }
    if job.job_id in state.pending:
        if row is None:
            row = next(
                (r for r in queue_rows(state, now, policy) if r["job_id"] == job.job_id), None
            )
        view["queue_length"] = len(state.pending)
        view["recorded_reason"] = reason_text(job.reason)
        view["max_wait_exceeded"] = job.max_wait_exceeded
        if row is not None:
            view.update(position=row["position"], reason=row["reason_text"])
            if row["estimated_start"] is not None:
                view["estimated_start"] = when(int(row["estimated_start"]))
    elif job.array_held:  # waits outside the queue, for its array's limit
        view["reason"] = reason_text(job.reason)
    if job.placements:
        view.update(placements=placements_text(job), funded=job.funded)
    if job.status.terminal:
        view.update(ended=job.end_reason, exit_code=job.exit_code)
    return view


def explain_text(view: dict[str, Any]) -> str:
    lines = [f"{view['job_id']}: {view['status']} ({view['tier']}, account {view['account']})"]
    if view.get("submitted_by"):
        lines.append(f"  submitted by {view['submitted_by']}")
    if "position" in view:
        lines.append(
            f"  waiting: position {view['position']} of {view['queue_length']}: {view['reason']}"
        )
    elif "reason" in view:
        lines.append(f"  waiting: {view['reason']}")
    if "estimated_start" in view:
        lines.append(f"  estimated start: {view['estimated_start']} (GPUs are held for it)")
    if view.get("max_wait_exceeded"):
        lines.append("  it has waited longer than its account's maximum-wait target")
    if "placements" in view:
        funded = "funded" if view["funded"] else "unfunded (may be preempted by funded work)"
        lines.append(f"  admitted to {view['placements']}, {funded}")
    if "ended" in view:
        lines.append(f"  ended: {view['ended']} (exit code {view['exit_code']})")
    if view.get("trail"):
        lines.append("  trail:")
        for step in view["trail"]:
            span = ""
            if step.get("until") is not None:
                span = f" (for {human_duration(step['until'] - step['at'])})"
            lines.append(
                f"    {when(step['at'])}  #{step['seq']:<6} {step['what']}: {step['text']}{span}"
            )
    standing = view["account_standing"]
    if standing is not None:
        factor = (
            "no usage yet"
            if standing["level_factor"] is None
            else f"{standing['level_factor']:.3f}"
        )
        lines.append(
            f"  account rank {standing['rank']}: share {standing['share']:.1%} among its siblings, "
            f"decayed usage {standing['decayed_usage_gpu_hours']:.2f} GPU-h, level factor {factor}"
        )
    return "\n".join(lines)
