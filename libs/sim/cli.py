"""``allot sim``: run a trace through the planner on a virtual clock and report metrics."""

import argparse
import json
import sys
import tomllib
from collections import defaultdict
from pathlib import Path
from typing import Any

import msgspec

from allot.client import progress
from allot.client.policyfile import load_policy
from allot.core import DEFAULT_POLICY, Policy, policy_hash
from allot.core.accounts import parent_of, read_tree
from allot.core.policytoml import PolicyError
from allot.proto.commands import BudgetGrantRequest
from allot.proto.events import AccountSettings
from allot.sim.idle import KINDS as IDLE_KINDS
from allot.sim.report import ReportError, write_report
from allot.sim.simulator import BudgetRefused, Settings, Simulator, run_policy
from allot.sim.trace import (
    Fill,
    NodeOutage,
    TraceError,
    TraceJob,
    check_outages,
    filled,
    load_trace,
    read_outages,
)

SHOWN = (
    "occupancy", *(f"idle_{kind}" for kind in IDLE_KINDS),
    "owed_delivered_overall", "owed_delivered_min_account",
    "jain_owed_delivered", "wait_p50_s", "wait_p90_s", "wait_p99_s", "debug_wait_p90_s",
    "max_wait_least_served_s", "preemptions_per_hour", "lost_gpu_hours_per_preemption",
    "node_failures", "lost_gpu_hours_to_failures", "mean_jct_s", "makespan_s", "sim_wall_s",
)  # fmt: skip
# Shown too where budgets are granted (``allot.sim.metrics``).
BUDGET_SHOWN = (
    "budget_owed_delivered_overall", "budget_owed_delivered_min", "unfunded_share",
    "funded_stops_inside_min_runtime",
)  # fmt: skip


def parse_cluster(text: str) -> Settings:
    count, sep, gpus = text.partition("x")
    if not (sep and count.isdigit() and gpus.isdigit() and int(count) > 0 and int(gpus) > 0):
        raise SystemExit(f"allot: --cluster {text!r}: expected NODESxGPUS, e.g. 24x8")
    return Settings(nodes=int(count), gpus_per_node=int(gpus))


def cmd_sim(args: argparse.Namespace) -> int:
    if not args.trace:
        print("allot: sim: --trace FILE is required (or: allot sim sweep)", file=sys.stderr)
        return 2
    try:
        policies = chosen(args.compare.split(",") if args.compare else [args.policy])
    except PolicyError as error:
        print(f"allot: {error}", file=sys.stderr)
        return 2
    settings = parse_cluster(args.cluster)
    fill = Fill(seed=args.seed, min_runtimes=args.fill == "ai2")
    try:
        traced, own_outages = load_trace(Path(args.trace), args.format)
        jobs = filled(traced, fill)
        outages = _outages(args, own_outages, settings)
        accounts: dict[str, AccountSettings] | None = None
        budgets: list[BudgetGrantRequest] = []
        if args.accounts:
            accounts, budgets = _accounts(args.accounts, jobs, settings)
    except TraceError as error:
        print(f"allot: {error}", file=sys.stderr)
        return 2
    if args.limit:
        jobs = jobs[: args.limit]
    failures = f"; {len(outages)} node failures" if outages else ""
    print(f"{len(jobs)} jobs{failures}; {fill.describe()}", file=sys.stderr)
    runs = []
    for name, policy in policies:
        with progress.shown(f"{name}: jobs ended", len(jobs)) as report:
            result, outcomes = run_policy(
                jobs, settings, policy, name, report, outages=outages, accounts=accounts,
                budgets=budgets,
            )  # fmt: skip
        result["fill"] = fill.describe()
        runs.append((result, outcomes))
    results = [result for result, _ in runs]
    if args.json:
        written: Any = results if args.compare else results[0]
        Path(args.json).write_text(json.dumps(written, indent=2, sort_keys=True) + "\n")
    shown = table(results)
    print(shown)
    if args.report:
        try:
            page = write_report(
                runs, Path(args.report), shown, fill.describe(), outages, settings.gpus_per_node
            )
        except ReportError as error:
            print(f"allot: {error}", file=sys.stderr)
            return 2
        print(f"report: {page}", file=sys.stderr)
    return 0


def chosen(specs: list[str]) -> list[tuple[str, Policy]]:
    """Each policy a name or a file gives, with the name its column goes by: its own, and
    its hash too where two different policies would share one."""
    policies = [load_policy(spec.strip()) for spec in specs]
    hashes: dict[str, set[str]] = defaultdict(set)
    for policy in policies:
        hashes[policy.name].add(policy_hash(policy))
    return [
        (p.name if len(hashes[p.name]) == 1 else f"{p.name}@{policy_hash(p)[:8]}", p)
        for p in policies
    ]


def _accounts(
    path: str, jobs: list[TraceJob], settings: Settings
) -> tuple[dict[str, AccountSettings], list[BudgetGrantRequest]]:
    """The account tree of ``path`` (the file ``allot accounts apply`` takes), every
    account the trace submits to in it; and the budgets of its ``[budgets."PATH"]`` tables."""
    try:
        declared = tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise TraceError(f"--accounts {path}: {error}") from None
    raw = declared.get("accounts")
    if not isinstance(raw, dict):
        raise TraceError(f'--accounts {path}: expected [accounts."PATH"] tables')
    tree, errors = read_tree(raw)
    if errors:
        raise TraceError(
            f"--accounts {path}: " + "; ".join(f"{e.field}={e.value}: {e.message}" for e in errors)
        )
    parents = {parent_of(p) for p in tree}
    for accounts, what in (
        (sorted({job.account for job in jobs} - tree.keys()), "does not declare"),
        (sorted({job.account for job in jobs} & parents), "declares with accounts below"),
    ):
        if accounts:  # intake takes jobs only for the leaves of the tree
            raise TraceError(
                f"--accounts {path}: the trace submits to accounts it {what}: "
                f"{', '.join(accounts[:5])}{' ...' if len(accounts) > 5 else ''}"
            )
    return tree, _budgets(path, declared.get("budgets", {}), tree, settings)


def _budgets(
    path: str, raw: object, tree: dict[str, AccountSettings], settings: Settings
) -> list[BudgetGrantRequest]:
    """Budgets as ``allot budget grant`` takes them, one ``[budgets."PATH"]`` table each
    (``share`` or ``gpu_hours``, and ``period``), checked as the ledger checks a grant:
    on this cluster, under this tree."""
    if not isinstance(raw, dict):
        raise TraceError(f'--accounts {path}: budgets: expected [budgets."PATH"] tables')
    requests = []
    for account, table in sorted(raw.items()):
        where = f"--accounts {path}: budgets.{account}"
        if not isinstance(table, dict):
            raise TraceError(f"{where}: expected a table of share or gpu_hours, and period")
        if account not in tree:
            raise TraceError(f"{where}: not an account of this file's [accounts] tables")
        if "account" in table:
            raise TraceError(f"{where}.account: the table's name is the account")
        try:
            requests.append(msgspec.convert({**table, "account": account}, BudgetGrantRequest))
        except msgspec.ValidationError as error:  # names the field as `$.share`
            raise TraceError(f"{where}: {str(error).replace('$.', '')}") from None
    try:  # the very grants a run makes, on a cluster with no jobs yet
        Simulator([], settings, DEFAULT_POLICY, accounts=tree, budgets=requests)
    except BudgetRefused as refused:
        problems = "; ".join(
            f"budgets.{refused.account}.{e.field}={e.value}: {_in_file(e.message)}"
            for e in refused.errors
        )
        raise TraceError(f"--accounts {path}: {problems}") from None
    return requests


def _in_file(message: str) -> str:
    """A grant's refusal worded for the file: its fields, not the command's options."""
    return message.replace("--gpu-hours", "gpu_hours").replace("--share", "share")


def _outages(
    args: argparse.Namespace, own: list[NodeOutage], settings: Settings
) -> list[NodeOutage]:
    """The node failures the trace carries (``own``), or those of ``--node-events``: not
    both."""
    if args.node_events and own:
        raise TraceError(
            f"--node-events {args.node_events}: the trace {args.trace} carries its own node "
            "failures; give one or the other"
        )
    outages = read_outages(Path(args.node_events)) if args.node_events else own
    check_outages(outages, settings.nodes)
    return outages


def table(results: list[dict[str, Any]]) -> str:
    """One column per policy, one row per metric."""
    rows = [["metric", *(r["policy"] for r in results)]]
    rows += [["jobs / gpus", *(f"{r['jobs']} / {r['gpus']}" for r in results)]]
    rows += [["refused (never fit)", *(str(r.get("refused", 0)) for r in results)]]
    budgeted = all(BUDGET_SHOWN[0] in r for r in results)
    for key in SHOWN + (BUDGET_SHOWN if budgeted else ()):
        rows.append([key, *(f"{r[key]:.4g}" for r in results)])
    rows += [["decisions (sha256)", *(r["decisions"][:16] for r in results)]]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows
    )
