"""Human-readable tables and JSON views of the folded state."""

import datetime
from collections.abc import Sequence
from typing import Any

import msgspec

from allot.core import DEFAULT_POLICY, JobRecord, NodeRecord, State, queue
from allot.core.budgets import MS_PER_HOUR
from allot.core.fairshare import FairSharePolicy, standings
from allot.core.owed import OwedDelivered
from allot.proto.events import PendingReason


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    ]
    return "\n".join(lines)


def when(ns: int | None) -> str:
    if ns is None:
        return "-"
    return datetime.datetime.fromtimestamp(ns / 1e9, datetime.UTC).strftime("%H:%M:%S.%f")[:-3]


def reason_text(reason: PendingReason | None) -> str:
    if reason is None:
        return "-"
    params = ", ".join(f"{k} {v}" for k, v in sorted(reason.params.items()))
    return f"{reason.code}({params})" if params else reason.code


def job_view(job: JobRecord) -> dict[str, Any]:
    view: dict[str, Any] = msgspec.to_builtins(job)
    view["status"] = str(job.status)
    return view


def jobs_table(jobs: Sequence[JobRecord]) -> str:
    rows = [
        [
            j.job_id,
            j.spec.name or "-",
            j.spec.account,
            j.spec.gpus,
            j.status,
            j.node_id or "-",
            ",".join(map(str, j.gpus)) or "-",
            "-" if j.exit_code is None else j.exit_code,
            when(j.submitted_at),
        ]
        for j in jobs
    ]
    return table(
        ["JOB", "NAME", "ACCOUNT", "GPUS", "STATUS", "NODE", "GPU IDS", "EXIT", "SUBMITTED"], rows
    )


def job_detail(job: JobRecord) -> str:
    lines = [
        f"job        {job.job_id}  ({job.spec.name or 'unnamed'})",
        f"status     {job.status}" + (f"  ({job.end_reason})" if job.end_reason else ""),
        f"account    {job.spec.account}",
        f"gpus       {job.spec.gpus}"
        + (f" on {job.node_id} [{','.join(map(str, job.gpus))}]" if job.node_id else ""),
        f"command    {' '.join(job.spec.command)}",
        f"submitted  {when(job.submitted_at)}   admitted {when(job.admitted_at)}   "
        f"started {when(job.started_at)}   ended {when(job.ended_at)}",
        f"exit code  {'-' if job.exit_code is None else job.exit_code}",
        f"output     {job.output_path or '-'}",
    ]
    if job.reason is not None:
        lines.append(f"waiting    {reason_text(job.reason)}")
    return "\n".join(lines)


def queue_rows(state: State, now: int) -> list[dict[str, Any]]:
    """Pending jobs in the planner's order, with why each waits and its account's rank."""
    ranked = standings(state, now, DEFAULT_POLICY.fair_share)
    rows = []
    for position, job in enumerate(queue(state, now, DEFAULT_POLICY), start=1):
        standing = ranked.get(job.spec.account)
        rows.append(
            {
                "position": position,
                "job_id": job.job_id,
                "name": job.spec.name,
                "tier": job.spec.tier,
                "account": job.spec.account,
                "account_rank": None if standing is None else standing.rank,
                "gpus": job.spec.gpus,
                "waiting_s": max(0, now - job.submitted_at) // 10**9,
                "reason": None if job.reason is None else msgspec.to_builtins(job.reason),
                "reason_text": reason_text(job.reason),
            }
        )
    return rows


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
            f"{r['waiting_s']}s",
            r["reason_text"],
        ]
        for r in rows
    ]
    headers = ["POS", "JOB", "NAME", "TIER", "ACCOUNT", "RANK", "GPUS", "WAITING", "REASON"]
    return table(headers, lines)


def node_view(node: NodeRecord) -> dict[str, Any]:
    view: dict[str, Any] = msgspec.to_builtins(node)
    view["allocated"] = {str(k): v for k, v in sorted(node.allocated.items())}
    view["free_gpus"] = node.free_gpus()
    return view


def nodes_table(state: State) -> str:
    rows = []
    for node_id, node in sorted(state.nodes.items()):
        health = "lost" if node.lost else ("healthy" if node.healthy else "unhealthy")
        if node.cordoned:
            health += ",cordoned"
        model = node.gpus[0].model if node.gpus else "-"
        jobs = sorted(set(node.allocated.values()))
        islands = " ".join(f"{i[0]}-{i[-1]}" for i in node.nvlink_islands if i) or "-"
        labels = ",".join(f"{k}={v}" for k, v in sorted(node.labels.items())) or "-"
        rows.append(
            [
                node_id,
                health,
                model,
                len(node.gpus),
                len(node.free_gpus()),
                islands,
                labels,
                " ".join(jobs) or "-",
            ]
        )
    headers = ["NODE", "STATE", "GPU MODEL", "GPUS", "FREE", "NVLINK", "LABELS", "JOBS"]
    return table(headers, rows)


def accounts_table(state: State) -> str:
    rows = []
    for path, settings in sorted(state.accounts.items()):
        depth = path.count("/")
        name = "  " * depth + path.rsplit("/", 1)[-1]
        quota = ", ".join(f"{r} {n}" for r, n in sorted(settings.quota.items())) or "-"
        wait = "-" if settings.max_wait_ns is None else f"{settings.max_wait_ns // 10**9}s"
        rows.append([name, path, settings.weight, quota, wait])
    return table(["ACCOUNT", "PATH", "WEIGHT", "QUOTA", "MAX WAIT"], rows)


def budget_rows(state: State, now: int, window_ns: int) -> list[dict[str, Any]]:
    """Per account: its share among siblings, usage in the window, fair-share level factor
    and rank (decayed usage, the planner's policy), and budget left this period."""
    ranked = standings(state, now, DEFAULT_POLICY.fair_share)
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
            }
        )
    return rows


def budget_table(rows: list[dict[str, Any]]) -> str:
    def hours(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    lines = [
        [
            "  " * row["account"].count("/") + row["account"].rsplit("/", 1)[-1],
            row["rank"],
            f"{row['share']:.1%}",
            hours(row["usage_gpu_hours_in_window"]),
            "new" if row["level_factor"] is None else f"{row['level_factor']:.3f}",
            hours(row["budget_left_gpu_hours"]),
        ]
        for row in rows
    ]
    return table(["ACCOUNT", "RANK", "SHARE", "USED GPU-H", "FACTOR", "BUDGET LEFT GPU-H"], lines)


def owed_table(report: list[OwedDelivered]) -> str:
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


def explain(state: State, job: JobRecord, now: int) -> dict[str, Any]:
    """Why a job is where it is: its place and reason while it waits, where and how it
    was admitted, how it ended; and the fair-share numbers of its account."""
    standing = standings(state, now, DEFAULT_POLICY.fair_share).get(job.spec.account)
    view: dict[str, Any] = {
        "job_id": job.job_id,
        "status": str(job.status),
        "tier": job.spec.tier,
        "account": job.spec.account,
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
        order = [j.job_id for j in queue(state, now, DEFAULT_POLICY)]
        view["position"] = order.index(job.job_id) + 1
        view["queue_length"] = len(order)
        view["reason"] = reason_text(job.reason)
    if job.node_id is not None:
        view.update(node=job.node_id, gpus=job.gpus, funded=job.funded)
    if job.status.terminal:
        view.update(ended=job.end_reason, exit_code=job.exit_code)
    return view


def explain_text(view: dict[str, Any]) -> str:
    lines = [f"{view['job_id']}: {view['status']} ({view['tier']}, account {view['account']})"]
    if "position" in view:
        lines.append(
            f"  waiting: position {view['position']} of {view['queue_length']}: {view['reason']}"
        )
    if "node" in view:
        funded = "funded" if view["funded"] else "unfunded (may be preempted by funded work)"
        lines.append(f"  admitted to {view['node']} GPUs {view['gpus']}, {funded}")
    if "ended" in view:
        lines.append(f"  ended: {view['ended']} (exit code {view['exit_code']})")
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
