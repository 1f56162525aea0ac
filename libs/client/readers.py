"""The commands that read: each asks the read model (``allot.proto.queries``, docs/adr/0018)
and prints its answer, as a table or as JSON. None of them folds the log."""

import argparse
import sys
from typing import Any

import msgspec

from allot.client import render
from allot.client.client import AsyncClient
from allot.client.sending import CommandError
from allot.client.session import connect, emit
from allot.core import JobRecord, NodeRecord
from allot.proto.events import AccountSettings
from allot.proto.queries import (
    ACCOUNTS,
    EXPLAIN,
    JOB,
    JOBS,
    MAX_ROWS,
    NODES,
    QUEUE,
    AccountsQuery,
    Answer,
    ExplainQuery,
    JobQuery,
    JobsQuery,
    NodesQuery,
    QueueQuery,
)


async def cmd_status(args: argparse.Namespace) -> int:
    try:
        columns = job_columns(args.format)
    except ValueError as error:
        print(f"allot: {error}", file=sys.stderr)
        return 2
    async with await connect(args) as client:
        array = None
        if args.job:
            answer = await ask(client, JOB, JobQuery(job_id=args.job))
            if answer is None:
                return 1
            if "array" not in answer.data:
                job = msgspec.convert(answer.data, JobRecord, strict=False)
                emit(args, answer.data, render.job_detail(job))
                return 0
            array = answer.data["array"]
        jobs, more = await jobs_matching(client, args, None if array is None else args.job)
    if jobs is None:
        return 2
    if array is not None:  # its tasks by index, after the array at a glance
        jobs.sort(key=lambda view: view["array_index"])
        shown = [msgspec.convert(view, JobRecord, strict=False) for view in jobs]
        table = render.jobs_table(shown, columns)
        emit(args, {"array": array, "tasks": jobs}, f"{render.array_summary(array)}\n\n{table}")
    else:
        shown = [msgspec.convert(view, JobRecord, strict=False) for view in jobs]
        emit(args, jobs, render.jobs_table(shown, columns))
    if more and not args.json:
        print(f"note: the newest {len(jobs)} shown; --limit N or --all for more", file=sys.stderr)
    return 0


def job_columns(given: str | None) -> tuple[str, ...]:
    """``--format job,status,reason`` as column names; ValueError naming what is known."""
    if not given:
        return render.DEFAULT_JOB_COLUMNS
    columns = tuple(c.strip().lower() for c in given.split(",") if c.strip())
    unknown = [c for c in columns if c not in render.JOB_COLUMNS]
    if unknown or not columns:
        known = ",".join(render.JOB_COLUMNS)
        raise ValueError(f"--format={given!r}: unknown column {unknown[:1] or given!r}; "
                         f"columns are {known}")  # fmt: skip
    return columns


async def jobs_matching(
    client: AsyncClient, args: argparse.Namespace, array: str | None = None
) -> tuple[list[dict[str, Any]] | None, bool]:
    """The jobs ``status``'s filters ask for (of them, the tasks of ``array``), newest
    first, page by page up to ``--limit`` (all of them with ``--all``); and whether there
    are more."""
    wanted = None if args.all else args.limit
    found: list[dict[str, Any]] = []
    before: int | None = None
    before_index, before_id = 0, ""
    while True:
        page = MAX_ROWS if wanted is None else min(MAX_ROWS, wanted - len(found))
        query = JobsQuery(states=args.state, accounts=args.account, users=args.user,
                          array=array, limit=page, before=before,
                          before_index=before_index, before_id=before_id)  # fmt: skip
        answer = await ask(client, JOBS, query)
        if answer is None:
            return None, False
        if not found:
            report_ignored(answer)  # once, with the first page
        found += answer.data
        before, before_index = answer.next_before, answer.next_before_index
        before_id = answer.next_before_id
        if not answer.more or before is None or (wanted is not None and len(found) >= wanted):
            return found, answer.more


async def asked(args: argparse.Namespace, name: str, query: msgspec.Struct) -> Answer | None:
    """One question on a connection of its own: ``ask``'s answer."""
    async with await connect(args) as client:
        return await ask(client, name, query)


async def ask(client: AsyncClient, name: str, query: msgspec.Struct) -> Answer | None:
    """The read model's answer, or None after saying why it refused the question."""
    try:
        return await client.query(name, query)
    except CommandError as error:
        for problem in error.errors:
            print(f"allot: {problem.field}={problem.value!r}: {problem.message}", file=sys.stderr)
        return None


def report_ignored(answer: Answer) -> None:
    """Events the fold refused are no error of this command, but an operator should know."""
    if not answer.ignored_count:
        return
    print(f"note: the fold ignored {answer.ignored_count} events of the log; the latest:",
          file=sys.stderr)  # fmt: skip
    for ignored in answer.ignored:
        print(f"  {ignored}", file=sys.stderr)


async def cmd_queue(args: argparse.Namespace) -> int:
    answer = await asked(args, QUEUE, QueueQuery(accounts=args.account, limit=args.limit))
    if answer is None:
        return 2
    data = answer.data
    emit(args, data, render.queue_table(data["rows"]))
    if not args.json:
        policy = data["policy"] + (f" ({data['policy_hash']})" if data["policy_hash"] else "")
        cut = f"; the first {len(data['rows'])} of {answer.total} shown" if answer.more else ""
        print(f"note: the planner's order under policy {policy}, at sequence "
              f"{data['computed_at_seq']}{cut}", file=sys.stderr)  # fmt: skip
    return 0


async def cmd_explain(args: argparse.Namespace) -> int:
    answer = await asked(args, EXPLAIN, ExplainQuery(job_id=args.job))
    if answer is None:
        return 1
    data = answer.data
    if "array" not in data:
        emit(args, data, render.explain_text(data))
        return 0
    task = data["task"]
    said = "no task of it waits" if task is None else "its first task that waits:\n"
    said += "" if task is None else render.explain_text(task)
    emit(args, data, f"{render.array_summary(data['array'])}\n\n{said}")
    return 0


async def cmd_nodes(args: argparse.Namespace) -> int:
    views: list[dict[str, Any]] = []
    async with await connect(args) as client:
        while True:  # page by page: a large cluster's nodes take more than one message
            after = views[-1]["node_id"] if views else None
            answer = await ask(client, NODES, NodesQuery(after=after))
            if answer is None:
                return 2
            views += answer.data
            if not answer.more or not answer.data:
                break
    nodes = {view["node_id"]: as_node(view) for view in views}
    why = {view["node_id"]: view["why"] for view in views}
    emit(args, views, render.nodes_table(nodes, why))
    return 0


async def cmd_nodes_show(args: argparse.Namespace) -> int:
    answer = await asked(args, NODES, NodesQuery(node_id=args.node))
    if answer is None:
        return 2
    [view] = answer.data
    node = as_node(view)
    summary = f"{args.node}: {render.node_state(node)}"
    if why := view["why"]:
        summary += render.printable(f" ({why})")
    emit(args, view, f"{summary}\n{render.gpus_table(node)}")
    return 0


def as_node(view: dict[str, Any]) -> NodeRecord:
    return msgspec.convert(view, NodeRecord, strict=False)


async def cmd_accounts_show(args: argparse.Namespace) -> int:
    answer = await asked(args, ACCOUNTS, AccountsQuery())
    if answer is None:
        return 2
    tree = answer.data["accounts"]
    settings = {path: msgspec.convert(s, AccountSettings) for path, s in tree.items()}
    emit(args, tree, render.accounts_table(settings))
    return 0


async def cmd_budget_show(args: argparse.Namespace) -> int:
    answer = await asked(args, ACCOUNTS, AccountsQuery(window_ns=args.window))
    if answer is None:
        return 2
    rows = answer.data["budget"]
    emit(args, rows, render.budget_table(rows))
    return 0
