"""The ``allot`` command line. Tables for people, ``--json`` for scripts and CI."""

import argparse
import contextlib
import json
import logging
import os
import sys
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import msgspec

from allot.bus import traced
from allot.bus.identity import IdentityError, Keyring
from allot.client import exitcodes, failures, render
from allot.client.jobfile import SpecError, spec_from
from allot.client.sending import CommandError
from allot.client.session import connect, connected_once, current_file, emit
from allot.core import arrays
from allot.core.accounts import parse_duration
from allot.core.budgets import MS_PER_HOUR
from allot.core.drain import Fate
from allot.core.model import JobStatus
from allot.proto.commands import BudgetGrantRequest, NodeCommandRequest
from allot.proto.events import TIERS, TOPOLOGIES
from allot.proto.queries import NODES, NodesQuery

if TYPE_CHECKING:
    from allot.client.client import AsyncClient

Handler = failures.Handler


# --- commands ---------------------------------------------------------------------------


def cmd_submit(args: argparse.Namespace) -> int | Coroutine[Any, Any, int]:
    """The submission is one command and its answer: no event loop, no nats-py (they were
    most of its time). With --wait, what follows needs both; they load while the job
    starts."""
    try:
        spec = spec_from(args)
    except SpecError as error:
        problem = error.problem
        print(f"allot: {problem.field}={problem.value!r}: {problem.message}", file=sys.stderr)
        return 2
    array = None
    if args.array is not None:
        try:
            array = arrays.parse(args.array)
        except arrays.ArraySyntaxError as error:
            print(f"allot: --array={error}", file=sys.stderr)
            return 2
    try:
        with connected_once(args) as connection:
            reply = connection.submit(spec, idempotency_key=args.idempotency_key, array=array)
    except CommandError as error:
        report_refusal(error, "submission refused, nothing was stored")
        return 2
    assert reply.job_id is not None
    if args.wait:
        if not args.quiet:
            print(reply.job_id, file=sys.stderr, flush=True)
        return _wait(args, reply.job_id, array is not None)
    if args.json:
        print(json.dumps(msgspec.to_builtins(reply), sort_keys=True))
    else:
        print(reply.job_id)
    return 0


async def _wait(args: argparse.Namespace, job_id: str, array: bool) -> int:
    """Until the job (or every task of the array) has ended; its exit code."""
    async with await connect(args) as client:
        if array:
            return await _wait_for_array(args, client, job_id)
        job = await client.wait(job_id, timeout=args.timeout)
        if args.json:
            print(json.dumps(render.job_view(job), sort_keys=True))
        else:
            print(
                f"{job.job_id} {job.status} (exit {job.exit_code}); output: {job.output_path}",
                file=sys.stderr,
            )
            if job.output_path and not args.quiet:
                await print_output(client, job.job_id)
        if job.exit_code is None:
            return 1 if job.status != "succeeded" else 0
        return job.exit_code if job.exit_code >= 0 else 128 - job.exit_code


async def _wait_for_array(args: argparse.Namespace, client: "AsyncClient", array_id: str) -> int:
    """Until every task has ended: 0 if every one succeeded, else 1 (as ``sbatch --wait``
    says only whether all went well; ``allot status ARRAY`` says which did not)."""
    view = await client.wait_array(array_id, timeout=args.timeout)
    if args.json:
        print(json.dumps(view, sort_keys=True))
    elif not args.quiet:
        print(render.array_summary(view), file=sys.stderr)
    return 0 if set(view["by_status"]) == {"succeeded"} else 1


async def print_output(client: "AsyncClient", job_id: str) -> None:
    """Worker 0's output, from its node's agent; where it cannot be had, one line why."""
    from allot.client import output

    try:
        await output.logs(client, job_id, 0, write_stdout)
    except (output.NoOutput, CommandError) as error:
        print(f"allot: its output cannot be shown: {error}", file=sys.stderr)


async def cmd_nodes_cordon(args: argparse.Namespace) -> int:
    """A drain --now loses the work of jobs that cannot resume: it is said first, and
    asked (or, without a terminal to ask on, given ``--yes``)."""
    if args.now and not args.drain:
        print("allot: --now says how to drain: give it with --drain", file=sys.stderr)
        return 2
    if args.now and not args.yes and not sys.stdin.isatty():
        print("allot: a drain --now loses the work of jobs that cannot resume; "
              "add --yes to confirm it without a terminal", file=sys.stderr)  # fmt: skip
        return 2
    request = NodeCommandRequest(
        node_id=args.node, action="cordon", drain=args.drain, now=args.now, reason=args.reason
    )
    async with await connect(args) as client:
        told: list[Fate] = []  # what the drain will do to each job
        known = True  # a node the log does not know: the intake refuses it, naming those it does
        if args.drain:
            try:
                [view] = (await client.query(NODES, NodesQuery(node_id=args.node))).data
            except CommandError:
                known = False
            else:  # a drain --now under way stays one: it is never softened
                mode = "drain_now_fates" if args.now or view["drain_now"] else "drain_fates"
                told = msgspec.convert(view[mode], list[Fate])
        if args.now and known:
            _say_what_is_lost(args.node, told)
            if not args.yes and not _agreed(f"drain {args.node} now? [y/N] "):
                print("allot: nothing changed", file=sys.stderr)
                return 1
        try:
            reply = await client.node_command(request)
        except CommandError as error:
            report_refusal(error, "cordon refused, nothing changed")
            return 2
    done = f"{args.node}: cordoned"
    if args.now:
        done += ", draining --now"
    elif args.drain:
        done += f", draining; waits for {render.fates_text(told)}" if told else ", draining"
    emit(args, msgspec.to_builtins(reply), render.printable(done))
    return 0


def _say_what_is_lost(node_id: str, told: list[Fate]) -> None:
    lost = render.drain_losses(told, time.time_ns())
    jobs = "no job" if not lost else "1 job" if len(lost) == 1 else f"{len(lost)} jobs"
    allows = ", as their minimum runtime allows" if lost else ""
    print(f"a drain --now of {node_id} stops {jobs}{allows}", file=sys.stderr)
    for line in lost:
        print(f"  {line}", file=sys.stderr)


def _agreed(question: str) -> bool:
    print(question, end="", file=sys.stderr, flush=True)
    return sys.stdin.readline().strip().lower() in ("y", "yes")


async def cmd_nodes_uncordon(args: argparse.Namespace) -> int:
    return await _node_command(args, NodeCommandRequest(node_id=args.node, action="uncordon"))


async def _node_command(args: argparse.Namespace, request: NodeCommandRequest) -> int:
    async with await connect(args) as client:
        try:
            reply = await client.node_command(request)
        except CommandError as error:
            report_refusal(error, f"{request.action} refused, nothing changed")
            return 2
    done = f"{request.node_id}: {request.action}ed"
    emit(args, msgspec.to_builtins(reply), done)
    return 0


async def cmd_nodes_gpu(args: argparse.Namespace) -> int:
    if not args.uuid:
        print("allot: give a GPU's UUID, or the start of one", file=sys.stderr)
        return 2
    async with await connect(args) as client:
        records = await client.events.read()
    state, runs, known = render.runs_on(records, args.uuid)
    if len(known) > 1:
        found = ", ".join(sorted(known))
        print(f"allot: {args.uuid!r} is the start of several GPUs' UUIDs: {found}", file=sys.stderr)
        return 2
    emit(args, msgspec.to_builtins(runs), render.gpu_runs(state, runs, args.uuid))
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    try:
        with connected_once(args) as connection:
            reply = connection.cancel(args.job, reason=args.reason)
    except CommandError as error:
        report_refusal(error, "cancel refused")
        return 2
    emit(args, msgspec.to_builtins(reply), f"cancel requested for {reply.job_id}")
    return 0


async def cmd_logs(args: argparse.Namespace) -> int:
    from allot.client import output

    rank = None if args.all_ranks else args.rank
    async with await connect(args) as client:
        try:
            await output.logs(client, args.job, rank, write_stdout, follow=args.follow)
        except output.NoOutput as error:
            print(f"allot: {error}", file=sys.stderr)
            return 1
        except CommandError as error:
            report_refusal(error, f"no output of {args.job}")
            return 2
        except BrokenPipeError:  # `allot logs JOB | head`: the reader has had enough
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def write_stdout(data: bytes) -> None:
    """A job's output as it is, byte for byte, at once (a follower shows it as it comes)."""
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


async def cmd_accounts_apply(args: argparse.Namespace) -> int:
    import tomllib

    try:
        declared = tomllib.loads(Path(args.file).read_text())
    except (OSError, tomllib.TOMLDecodeError) as error:
        print(f"allot: {args.file}: {error}", file=sys.stderr)
        return 2
    accounts = declared.get("accounts")
    if not isinstance(accounts, dict):
        print(f'allot: {args.file}: expected [accounts."PATH"] tables', file=sys.stderr)
        return 2
    async with await connect(args) as client:
        try:
            reply = await client.apply_accounts(accounts)
        except CommandError as error:
            report_refusal(error, f"{args.file} refused, nothing changed")
            return 2
    summary = (
        f"defined {len(reply.defined)}, updated {len(reply.updated)}, removed {len(reply.removed)}"
    )
    emit(args, msgspec.to_builtins(reply), summary)
    return 0


def report_refusal(error: CommandError, headline: str) -> None:
    print(f"allot: {headline}:", file=sys.stderr)
    for problem in error.errors:
        print(f"  {problem.field}={problem.value!r}: {problem.message}", file=sys.stderr)


async def cmd_budget_grant(args: argparse.Namespace) -> int:
    request = BudgetGrantRequest(
        account=args.account, period=args.period, gpu_hours=args.gpu_hours, share=args.share
    )
    async with await connect(args) as client:
        try:
            reply = await client.grant_budget(request)
        except CommandError as error:
            report_refusal(error, "grant refused, nothing changed")
            return 2
    text = f"{reply.account}: {reply.gpu_ms / MS_PER_HOUR:g} GPU-hours per {args.period}, from now"
    emit(args, msgspec.to_builtins(reply), text)
    return 0


async def cmd_budget_report(args: argparse.Namespace) -> int:
    from allot.core.owed import owed_and_delivered  # folds the log

    async with await connect(args) as client:
        records = await client.events.read()
    end = time.time_ns()
    report = owed_and_delivered(records, end - args.window, end)
    rows = [dict(msgspec.to_builtins(r), ratio=r.ratio) for r in report]
    emit(args, rows, render.owed_table(report))
    return 0


async def cmd_replay(args: argparse.Namespace) -> int:
    from allot.client import replay

    return await replay.cmd_replay(args, connect)


async def cmd_trace(args: argparse.Namespace) -> int:
    from allot.client import jobtrace
    from allot.client.logfile import LogFileError, read_log

    exporting = args.what[0] == "export"
    wanted = args.what[1:] if exporting else args.what
    if not exporting and len(wanted) != 1:
        print("allot: trace: give one job id, or `export [JOB ...]`", file=sys.stderr)
        return 2
    try:
        if args.log:
            records = list(read_log(Path(args.log)))
        else:
            async with await connect(args) as client:
                records = await client.events.read()
    except LogFileError as error:
        print(f"allot: {error}", file=sys.stderr)
        return 2
    state = jobtrace.folded(records)
    if exporting and not wanted:
        since = time.time_ns() - args.since if args.since is not None else 0
        wanted = jobtrace.jobs_since(records, since, state)
    try:
        traces = [jobtrace.job_trace(job_id, records, state) for job_id in wanted]
    except jobtrace.NoSuchJob as error:
        print(f"allot: {error.args[0]}", file=sys.stderr)
        return 1
    if not exporting:
        [trace] = traces
        emit(args, msgspec.to_builtins(trace), jobtrace.waterfall(trace))
        return 0
    ended = [t for t in traces if t.ended]
    if not traced.exporting():
        print("allot: trace export: set OTEL_EXPORTER_OTLP_ENDPOINT (or "
              "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) to where spans go", file=sys.stderr)  # fmt: skip
        return 2
    try:
        spans = jobtrace.export(ended)
    except jobtrace.ExportFailed as error:
        print(f"allot: {error}", file=sys.stderr)
        return 1
    going = len(traces) - len(ended)
    still = f"; {going} still going on, not sent" if going else ""
    emit(args, {"jobs": len(ended), "spans": spans, "still_going_on": going},
         f"sent {spans} spans of {len(ended)} jobs{still}")  # fmt: skip
    return 0


async def cmd_log_export(args: argparse.Namespace) -> int:
    from allot.client import replay

    return await replay.cmd_log_export(args, connect)


async def cmd_log_import(args: argparse.Namespace) -> int:
    from allot.client import replay

    return await replay.cmd_log_import(args, connect)


async def cmd_log_archive(args: argparse.Namespace) -> int:
    from allot.client import archive

    return await archive.cmd_log_archive(args, connect)


async def cmd_log_quarantine(args: argparse.Namespace) -> int:
    from allot.client import replay

    return await replay.cmd_log_quarantine(args, connect)


async def cmd_log_tail(args: argparse.Namespace) -> int:
    async with await connect(args) as client:
        records = await client.tail(args.n)
        for record in records:
            print_record(args, record)
        if args.follow:
            start = records[-1].seq + 1 if records else 1
            async for record in client.events.follow(start):
                print_record(args, record)
    return 0


def print_record(args: argparse.Namespace, record: Any) -> None:
    body = (
        msgspec.to_builtins(record.event) if record.event is not None else {"error": record.error}
    )
    if args.json:
        print(
            json.dumps(
                {"seq": record.seq, "subject": record.subject, "event": body}, sort_keys=True
            ),
            flush=True,
        )
        return
    fields = (
        {k: v for k, v in body.items() if k not in ("meta", "type")}
        if isinstance(body, dict)
        else {}
    )
    at = render.when(record.event.meta.at) if record.event is not None else "-"
    summary = " ".join(f"{k}={json.dumps(v, separators=(',', ':'))}" for k, v in fields.items())
    print(f"{record.seq:>6} {at} {record.type:<18} {summary}", flush=True)


async def cmd_users_add(args: argparse.Namespace) -> int:
    """A new identity in the keyring of the ``allot up`` running here, admitted at once;
    or in the folder ``--identities`` names, for a server run by ``allot deploy``."""
    from allot.bus.server import EmbeddedNats

    if args.identities is not None:
        return _add_to_installation(args)
    try:
        current = json.loads(current_file().read_text())
        data_dir = Path(current["data_dir"])
        # Each server of its NATS cluster, or its one server (as an older `allot up` said).
        where = current.get("nats_data_dirs") or [str(data_dir / "nats")]
    except (OSError, ValueError, KeyError, TypeError):
        print("allot: no `allot up` runs here (users are added on its machine)", file=sys.stderr)
        return 2
    keyring = Keyring(data_dir / "identities")
    try:
        servers = [EmbeddedNats.running_in(Path(server), keyring) for server in where]
    except (OSError, ValueError, KeyError, TypeError):
        print("allot: this `allot up` runs --insecure: it has no identities", file=sys.stderr)
        return 2
    try:
        path = keyring.add(args.name, "operator" if args.admin else "user")
        for server in servers:
            server.reload()
    except (IdentityError, OSError, ValueError) as error:
        print(f"allot: {error}", file=sys.stderr)
        return 2
    role = "an operator" if args.admin else "a user"
    emit(
        args,
        {"name": args.name, "identity": str(path), "operator": args.admin},
        f"{args.name} is {role}; its identity (keep it private, give it to them): {path}\n"
        f"They run the CLI with ALLOT_IDENTITY={path}. To let them submit, name them in an\n"
        f'account\'s members (or admins) and apply the tree: members = ["{args.name}"].',
    )
    return 0


def _add_to_installation(args: argparse.Namespace) -> int:
    try:
        path = Keyring(args.identities).add(args.name, "operator" if args.admin else "user")
    except (IdentityError, OSError, ValueError) as error:
        print(f"allot: {error}", file=sys.stderr)
        return 2
    emit(
        args,
        {"name": args.name, "identity": str(path), "operator": args.admin},
        f"{args.name}'s identity (keep it private, give it to them): {path}\n"
        "To admit it, write the server's config again and have it reread it:\n"
        "  allot deploy nats-config --identities … --out CONFIG   (the flags as before)\n"
        "  nats-server --signal reload",
    )
    return 0


async def cmd_up(args: argparse.Namespace) -> int:
    from allot.client.up import up

    return await up(args)


async def cmd_bench_ledger(args: argparse.Namespace) -> int:
    from allot.client.bench_ledger import bench_ledger

    return bench_ledger(args)


async def cmd_bench_planner(args: argparse.Namespace) -> int:
    from allot.client.bench_planner import bench_planner

    return bench_planner(args)


async def cmd_sim(args: argparse.Namespace) -> int:
    from allot.sim.cli import cmd_sim as run

    return run(args)


async def cmd_sim_sweep(args: argparse.Namespace) -> int:
    from allot.sim.sweep_cli import cmd_sweep

    return cmd_sweep(args)


async def cmd_bench_replay(args: argparse.Namespace) -> int:
    from allot.client.bench_replay import bench_replay

    return bench_replay(args)


async def cmd_bench_snapshot(args: argparse.Namespace) -> int:
    from allot.client.bench_snapshot import bench_snapshot

    return await bench_snapshot(args)


async def cmd_bench_view(args: argparse.Namespace) -> int:
    from allot.client.bench_view import bench_view

    return await bench_view(args)


async def cmd_bench_chaos(args: argparse.Namespace) -> int:
    from allot.client.bench_chaos import bench_chaos

    return await bench_chaos(args)


async def cmd_bench(args: argparse.Namespace) -> int:
    from allot.client.bench import bench

    return await bench(args)


# --- parser -----------------------------------------------------------------------------


def count(text: str) -> int:
    """An argparse type: a whole number of at least 1 (jobs, runs, submissions)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: a whole number of at least 1")
    return value


def duration(text: str) -> int:
    """An argparse type: ``30m``, ``7d`` ... as nanoseconds."""
    try:
        return parse_duration(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def add_sim_sweep(sim_commands: Any) -> None:
    """``allot sim sweep``; its options are checked by the command, each refusal one line."""
    help = "run many workload slices at several demand levels under each policy; report"
    sweep = sim_commands.add_parser("sweep", help=help, description=help)
    sweep.set_defaults(handler=cmd_sim_sweep)
    sweep.add_argument("--out", metavar="DIR", help="write sweep.md, sweep.json, sweep.png here")
    sweep.add_argument(
        "--policies",
        default="fifo,priority,kueue,slurm,allot",
        metavar="P1,P2,...",
        help="names or policy files (default fifo,priority,kueue,slurm,allot)",
    )
    sweep.add_argument("--jobs", metavar="N", help="worker processes (default: the CPUs)")
    sweep.add_argument(
        "--quick", action="store_true", help="a small sweep: 3 slices of at most 300 jobs"
    )
    sweep.add_argument("--slices", metavar="N", help="only N slices, the families in turn")
    sweep.add_argument("--demand", metavar="D1,D2,...", help="demand levels (default 1.5,2,3)")
    sweep.add_argument(
        "--traces",
        default="../shared/data/traces",
        metavar="DIR",
        help="where philly.csv and alibaba-openb-pods.csv are (default ../shared/data/traces); "
        "without them, synthetic slices only",
    )


class _WholeParserNeeded(Exception):
    """The part of the parser built for one command found an error of the whole."""


class _CommandsTop(argparse.ArgumentParser):
    """The top of a parser built for one command. An error found here (arguments left
    over after the command's) is said by the whole parser, whose usage lists every
    command; the command's own errors are said by its part, the same as in the whole."""

    def error(self, message: str) -> NoReturn:
        raise _WholeParserNeeded(message)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser; given the ``command`` about to run, only that command's
    part of it (a few milliseconds of every call, ~50 parsers), else all of it."""

    def wanted(name: str) -> bool:
        return command is None or command == name

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--nats-url",
        help="NATS server, or a cluster's servers comma-separated (default: $ALLOT_NATS_URL, "
        "else the one `allot up` started)",
    )
    common.add_argument("--json", action="store_true", help="machine-readable output")

    parser = (argparse.ArgumentParser if command is None else _CommandsTop)(
        prog="allot",
        description="Allot: a scheduler for shared GPU clusters.",
        epilog=f"exit codes: {exitcodes.OK} done, {exitcodes.FAILED} failed, {exitcodes.USAGE} "
        f"bad input or refused, {exitcodes.TOO_LARGE} too large for NATS, "
        f"{exitcodes.UNREACHABLE} NATS unreachable, {exitcodes.IN_USE} data directory in use, "
        f"{exitcodes.NO_ANSWER} a service did not answer, {exitcodes.WAIT_TIMED_OUT} "
        f"--wait timed out, {exitcodes.INTERRUPTED} interrupted, {exitcodes.BROKEN_PIPE} "
        "output closed (README: Exit codes)",
    )
    commands = parser.add_subparsers(dest="command_name", required=True)

    def add(name: str, handler: Handler, help: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, parents=[common], help=help, description=help)
        sub.set_defaults(handler=handler)
        return sub

    if wanted("up"):
        up = add("up", cmd_up, "run NATS, every service and simulated nodes on this machine")
        up.add_argument("--nodes", default="2x8", help="simulated nodes, COUNTxGPUS (default 2x8)")
        up.add_argument(
            "--cluster", type=Path, help="a TOML cluster file of [[nodes]] instead of --nodes"
        )
        up.add_argument(
            "--data-dir",
            type=Path,
            help="where the log and job files live (default $ALLOT_HOME/data)",
        )
        up.add_argument("--demo", action="store_true", help="submit a few small jobs once up")
        up.add_argument(
            "--metrics-port", type=int, default=9464,
            help="serve Prometheus metrics on 127.0.0.1:PORT (default 9464; 0: a free port)",
        )  # fmt: skip
        # up imports this module: not at its top
        from allot.client.upargs import dashboard_option, nats_cluster_option

        dashboard_option(up)
        nats_cluster_option(up)
        up.add_argument(
            "--node-timeout",
            type=float,
            default=10.0,
            help="seconds of silence before a node is lost",
        )
        up.add_argument(
            "--insecure",
            action="store_true",
            help="no identities: anyone who reaches NATS may connect and do anything",
        )
        up.add_argument(
            "--tls",
            action="store_true",
            help="TLS on every NATS connection, by a CA made for this machine (clients: "
            "ALLOT_TLS_CA=its ca.pem)",
        )

    if wanted("submit"):
        submit = add(
            "submit", cmd_submit, "submit a job: allot submit --gpus N --account A -- CMD ARGS..."
        )
        submit.add_argument("--file", help="a TOML job file; flags given as well win over it")
        submit.add_argument("--gpus", type=int, help="GPUs per worker (an elastic job's minimum)")
        submit.add_argument("--workers", type=int, help="workers started together as a gang (1)")
        submit.add_argument(
            "--topology",
            choices=TOPOLOGIES,
            help="where all the job's GPUs must be: one NVLink island, node or rack, "
            "or any (default)",
        )
        submit.add_argument("--flavor", help="the GPU model it needs, e.g. H100 (default: any)")
        submit.add_argument("--max-gpus", type=int, help="elastic: it can use up to this many GPUs")
        submit.add_argument("--account", help="account path, e.g. ml/vision/alice")
        submit.add_argument("--name", help="a name to recognise the job by")
        submit.add_argument(
            "--tier", choices=TIERS, help="interactive, batch (default), best-effort"
        )
        submit.add_argument(
            "--idempotency-key", help="retrying with the same key never submits twice"
        )
        submit.add_argument(
            "--array",
            metavar="INDICES",
            help="a job array: one task per index, e.g. 0-999, 1,3,5-9 or 0-99:2, and %%N for at "
            "most N at once (0-999%%50); each task sees ALLOT_ARRAY_INDEX",
        )
        submit.add_argument(
            "--resumable",
            action="store_true",
            default=None,
            help="it checkpoints and may be requeued",
        )
        submit.add_argument(
            "--env", action="append", default=[], metavar="NAME=VALUE", help="extra environment"
        )
        submit.add_argument(
            "--workdir", help="working directory of the job (default: its job directory)"
        )
        submit.add_argument("--cpus", type=int, help="CPUs per worker (DRF charging, quotas)")
        submit.add_argument("--memory-mib", type=int, help="memory per worker")
        submit.add_argument(
            "--min-runtime",
            type=duration,
            help="e.g. 30m: protected this long; with a budget, funded",
        )
        submit.add_argument(
            "--max-runtime",
            type=duration,
            help="e.g. 4h or 1h30m: the longest the job will run (declared)",
        )
        submit.add_argument(
            "--checkpoint-interval", type=duration, help="e.g. 10m: how often it checkpoints"
        )
        submit.add_argument(
            "--grace",
            type=duration,
            help="from SIGTERM to SIGKILL when it is stopped (default 30s)",
        )
        submit.add_argument(
            "--wait", action="store_true", help="follow the job and exit with its exit code"
        )
        submit.add_argument(
            "--timeout",
            type=float,
            help=f"with --wait: give up after this many seconds (exit {exitcodes.WAIT_TIMED_OUT}; "
            "the job goes on)",
        )
        submit.add_argument(
            "--quiet", action="store_true", help="with --wait: do not print the job's output"
        )
        submit.add_argument(
            "command", nargs=argparse.REMAINDER, help="-- then the command and its arguments"
        )

    if wanted("status"):
        from allot.client.readers import cmd_status

        status = add(
            "status", cmd_status, "jobs, newest first (filters below), or one job in detail"
        )
        status.add_argument("job", nargs="?")
        status.add_argument(
            "--state", action="append", default=[], choices=[str(s) for s in JobStatus],
            help="only jobs in this state (repeat for several)",
        )  # fmt: skip
        status.add_argument(
            "--account", action="append", default=[], help="only jobs of this account or below it"
        )
        status.add_argument(
            "--user", action="append", default=[], help="only jobs this identity submitted"
        )
        status.add_argument(
            "--limit", type=int, default=100, help="at most this many jobs, newest first (100)"
        )
        status.add_argument("--all", action="store_true", help="every job that matches")
        status.add_argument(
            "-o", "--format", metavar="COLUMNS",
            help=f"columns to show, e.g. job,status,reason (of: {','.join(render.JOB_COLUMNS)})",
        )  # fmt: skip

    if wanted("queue"):
        from allot.client.readers import cmd_queue

        queue_cmd = add(
            "queue", cmd_queue, "pending jobs in the planner's order, with the reason each waits"
        )
        queue_cmd.add_argument(
            "--account", action="append", default=[], help="only jobs of this account or below it"
        )
        queue_cmd.add_argument(
            "--limit", type=int, default=500, help="at most this many jobs, from the first (500)"
        )

    if wanted("logs"):
        logs = add("logs", cmd_logs, "a job's output (stdout and stderr), from wherever it ran")
        logs.add_argument("job")
        logs.add_argument(
            "-f",
            "--follow",
            action="store_true",
            help="wait for it to start, then show its output until it ends",
        )
        ranks = logs.add_mutually_exclusive_group()
        ranks.add_argument(
            "--rank",
            type=int,
            default=0,
            help="the worker of a gang whose output to show (default 0)",
        )
        ranks.add_argument(
            "--all-ranks", action="store_true", help="every worker's, each line after its rank"
        )

    if wanted("explain"):
        from allot.client.readers import cmd_explain

        explain_cmd = add("explain", cmd_explain, "why a job waits, where it runs, how it ended")
        explain_cmd.add_argument("job")

    if wanted("nodes"):
        from allot.client.readers import cmd_nodes, cmd_nodes_show

        nodes = add(
            "nodes", cmd_nodes, "nodes, their state and their jobs; cordon, drain, uncordon"
        )
        nodes_sub = nodes.add_subparsers(dest="nodes_command", required=False)
        cordon = nodes_sub.add_parser(
            "cordon", parents=[common], help="place nothing new on a node; --drain also empties it"
        )
        cordon.set_defaults(handler=cmd_nodes_cordon)
        cordon.add_argument("node")
        cordon.add_argument(
            "--drain",
            action="store_true",
            help="also stop its jobs that can resume, each once past its minimum runtime (at a "
            "checkpoint); jobs that cannot resume are left to finish, or to reach max_runtime",
        )
        cordon.add_argument(
            "--now",
            action="store_true",
            help="with --drain: stop every job once past its minimum runtime, those that cannot "
            "resume too (their work is lost); says what will be lost and asks first",
        )
        cordon.add_argument(
            "--yes",
            action="store_true",
            help="do not ask before a --now drain (needed without a TTY)",
        )
        cordon.add_argument("--reason", default="", help="why, for the log")
        uncordon = nodes_sub.add_parser(
            "uncordon",
            parents=[common],
            help="place work on it again; its recorded GPU faults are cleared (it was repaired)",
        )
        uncordon.set_defaults(handler=cmd_nodes_uncordon)
        uncordon.add_argument("node")
        show_node = nodes_sub.add_parser(
            "show", parents=[common], help="a node's GPUs: UUIDs, MIG, health, who holds each"
        )
        show_node.set_defaults(handler=cmd_nodes_show)
        show_node.add_argument("node")
        ran_on = nodes_sub.add_parser(
            "gpu", parents=[common], help="every job that ran on a GPU, by its UUID (or a prefix)"
        )
        ran_on.set_defaults(handler=cmd_nodes_gpu)
        ran_on.add_argument("uuid")

    if wanted("node"):
        commands.add_parser(
            "node",
            help="run this host's node agent, which finds its GPUs through NVML: "
            "allot node --nats-url URL --identity FILE --work-dir DIR (allot node --help)",
            add_help=False,
        )

    if wanted("cancel"):
        cancel = add("cancel", cmd_cancel, "cancel a pending or running job")
        cancel.add_argument("job")
        cancel.add_argument("--reason", default="")

    if wanted("accounts"):
        from allot.client.readers import cmd_accounts_show

        accounts_cmd = commands.add_parser("accounts", help="the account tree")
        accounts_sub = accounts_cmd.add_subparsers(dest="accounts_command", required=True)
        apply = accounts_sub.add_parser(
            "apply", parents=[common], help="make the account tree equal to a TOML file"
        )
        apply.set_defaults(handler=cmd_accounts_apply)
        apply.add_argument("file", help='a TOML file of [accounts."PATH"] tables')
        show = accounts_sub.add_parser("show", parents=[common], help="the account tree")
        show.set_defaults(handler=cmd_accounts_show)

    if wanted("users"):
        users_cmd = commands.add_parser("users", help="the identities that may connect")
        users_sub = users_cmd.add_subparsers(dest="users_command", required=True)
        add_user = users_sub.add_parser(
            "add",
            parents=[common],
            help="make an identity for a person, and let it connect to the running `allot up`",
        )
        add_user.set_defaults(handler=cmd_users_add)
        add_user.add_argument("name", help="the principal its commands are sent as, e.g. alice")
        add_user.add_argument(
            "--admin",
            action="store_true",
            help="an operator: may do anything (apply, grant, drain)",
        )
        add_user.add_argument(
            "--identities",
            type=Path,
            help="the identities folder of an installation run by `allot deploy`, rather than "
            "the `allot up` running here",
        )

    if wanted("deploy"):
        from allot.client import deploy, kubernetes

        kubernetes.add_parser(deploy.add_parser(commands))

    if wanted("budget"):
        from allot.client.readers import cmd_budget_show

        budget_cmd = commands.add_parser("budget", help="budgets of GPU time and fair share")
        budget_sub = budget_cmd.add_subparsers(dest="budget_command", required=True)
        grant = budget_sub.add_parser(
            "grant", parents=[common], help="grant an account GPU time per period"
        )
        grant.set_defaults(handler=cmd_budget_grant)
        grant.add_argument("account")
        amount = grant.add_mutually_exclusive_group(required=True)
        amount.add_argument("--gpu-hours", type=float, help="GPU-hours per period")
        amount.add_argument(
            "--share", type=float, help="a fraction (0..1] of the cluster's GPU time"
        )
        grant.add_argument("--period", default="7d", help="e.g. 7d (default), 30d, 12h")
        budget_show = budget_sub.add_parser(
            "show",
            parents=[common],
            help="the tree: share, usage, fair-share factor, rank, budget left",
        )
        budget_show.set_defaults(handler=cmd_budget_show)
        budget_show.add_argument(
            "--window", type=duration, default="7d", help="usage over this window (default 7d)"
        )

        report = budget_sub.add_parser(
            "report", parents=[common], help="GPU-hours owed and delivered per account"
        )
        report.set_defaults(handler=cmd_budget_report)
        report.add_argument(
            "--window", type=duration, default="30d", help="the last DURATION (default 30d)"
        )

    if wanted("replay"):
        replay = add(
            "replay",
            cmd_replay,
            "recompute every recorded plan (--verify), or show the cluster at a moment (--at)",
        )
        what = replay.add_mutually_exclusive_group(required=True)
        what.add_argument(
            "--verify", action="store_true", help="exit 1, with a diff, if any plan diverges"
        )
        what.add_argument("--at", metavar="SEQ|TIME", help="a sequence, or e.g. 2026-11-30T14:05Z")
        replay.add_argument("--log", metavar="FILE", help="an exported log instead of the stream")

    if wanted("trace"):
        trace_cmd = add(
            "trace",
            cmd_trace,
            "a job's trace from the log, as a waterfall; `trace export` sends ended jobs' "
            "traces over OTLP (OTEL_EXPORTER_OTLP_ENDPOINT)",
        )
        trace_cmd.add_argument("what", nargs="+", metavar="JOB | export [JOB ...]")
        trace_cmd.add_argument(
            "--since", type=duration, help="export: the jobs submitted in the last DURATION"
        )
        trace_cmd.add_argument(
            "--log", metavar="FILE", help="an exported log instead of the stream"
        )

    if wanted("log"):
        log_cmd = commands.add_parser("log", help="the event log")
        log_sub = log_cmd.add_subparsers(dest="log_command", required=True)
        tail = log_sub.add_parser("tail", parents=[common], help="the last events of the log")
        tail.set_defaults(handler=cmd_log_tail)
        tail.add_argument("-n", type=int, default=20, help="how many events (default 20)")
        tail.add_argument("-f", "--follow", action="store_true", help="keep printing new events")
        export = log_sub.add_parser(
            "export", parents=[common], help="write the log as JSON lines (.gz: compressed)"
        )
        export.set_defaults(handler=cmd_log_export)
        export.add_argument("file")
        load = log_sub.add_parser(
            "import", parents=[common], help="load an exported log into an empty stream"
        )
        load.set_defaults(handler=cmd_log_import)
        load.add_argument("file")
        archive = log_sub.add_parser(
            "archive",
            parents=[common],
            help="write the log up to a sequence to a file, then purge it from the stream "
            "(services start from a snapshot; an operator's command)",
        )
        archive.set_defaults(handler=cmd_log_archive)
        archive.add_argument(
            "--upto", type=int, required=True, metavar="SEQ", help="the last sequence archived"
        )
        archive.add_argument(
            "--to", required=True, metavar="FILE", help="where (allot log export's format)"
        )
        quarantine = log_sub.add_parser(
            "quarantine",
            parents=[common],
            help="mark an event as not to be folded (recorded as an event: replay agrees)",
        )
        quarantine.set_defaults(handler=cmd_log_quarantine)
        quarantine.add_argument("seq", type=int, metavar="SEQ", help="the event's sequence")
        quarantine.add_argument("--reason", required=True, help="why, for the log")

    if wanted("sim"):
        sim = commands.add_parser(
            "sim", help="simulate a trace under a policy on a virtual clock; print the metrics"
        )
        sim.set_defaults(handler=cmd_sim)
        add_sim_sweep(sim.add_subparsers(dest="sim_command", title="subcommands"))
        # Required unless a subcommand is given: cmd_sim says so when it is missing.
        sim.add_argument("--trace", help="a trace file (required)")
        sim.add_argument(
            "--format", default="canonical", help="canonical (default), philly, alibaba, allot-log"
        )
        sim.add_argument("--cluster", default="24x8", help="NODESxGPUS (default 24x8)")
        sim.add_argument(
            "--accounts",
            metavar="FILE",
            help="the account tree to run under, as for `allot accounts apply` (default: each "
            "account of the trace a leaf of equal weight and equal quota)",
        )
        sim.add_argument(
            "--node-events",
            metavar="FILE",
            help="node failures: a CSV of node,down_s,up_s (node: its index in the cluster, from "
            "0; up_s empty: it never came back); an allot-log trace carries its own",
        )
        sim.add_argument(
            "--policy",
            default="allot",
            metavar="NAME|FILE",
            help="fifo, priority, kueue, slurm, allot (default), or a TOML policy file",
        )
        sim.add_argument(
            "--compare",
            metavar="P1,P2,...",
            help="run several policies side by side: names and files, e.g. allot,./mine.toml",
        )
        sim.add_argument("--seed", type=int, default=1, help="for what the trace does not say")
        sim.add_argument(
            "--fill",
            choices=("default", "ai2"),
            default="default",
            help="what jobs declare where the trace does not say: default (no minimum runtime), "
            "or ai2 (every job declares a minimum runtime of at most 8 h, the Ai2 contract)",
        )
        sim.add_argument("--limit", type=int, help="only the first N jobs")
        sim.add_argument("--json", metavar="OUT", help="also write the metrics as JSON to OUT")
        sim.add_argument("--report", metavar="DIR", help="write an HTML report with PNG plots")

    if wanted("bench"):
        bench_cmd = commands.add_parser("bench", help="benchmarks, reproducible from a seed")
        benches = bench_cmd.add_subparsers(dest="bench_name", required=True)

        def add_bench(name: str, handler: Handler, help: str) -> argparse.ArgumentParser:
            sub = benches.add_parser(name, parents=[common], help=help, description=help)
            sub.set_defaults(handler=handler)
            return sub

        stack = add_bench("stack", cmd_bench, "submit-to-start latency and intake throughput")
        stack.add_argument(
            "--jobs", type=count, default=100, help="jobs for the latency run (default 100)"
        )
        stack.add_argument(
            "--burst", type=count, default=10_000,
            help="submissions for the throughput run (default 10,000)",
        )  # fmt: skip
        stack.add_argument(
            "--array-tasks", type=count, default=1000, help="tasks of the array submitted (1,000)"
        )
        stack.add_argument(
            "--cli-runs", type=count, default=20,
            help="`allot submit` processes timed one after another, cold (default 20)",
        )  # fmt: skip
        stack.add_argument(
            "--concurrency", type=count, default=64, help="submissions in flight at once"
        )
        stack.add_argument(
            "--insecure", action="store_true", help="without identities, to measure what they cost"
        )
        stack.add_argument("--tls", action="store_true", help="with TLS, to measure what it costs")
        stack.add_argument(
            "--metrics", action="store_true", help="with the metrics service, to measure its cost"
        )

        ledger = add_bench("ledger", cmd_bench_ledger, "the ledger's fold and fair-share ranking")
        ledger.add_argument(
            "--events", type=int, default=200_000, help="events in the synthetic log"
        )
        ledger.add_argument("--teams", type=int, default=64, help="leaf accounts")
        ledger.add_argument("--seed", type=int, default=1)
        ledger.add_argument("--repeat", type=int, default=3)

        replay_bench = add_bench("replay", cmd_bench_replay, "fold and verify a long seeded log")
        replay_bench.add_argument("--events", type=int, default=1_000_000)
        replay_bench.add_argument("--seed", type=int, default=1)

        view = add_bench(
            "view", cmd_bench_view, "allot status, queue and explain as the log grows (read model)"
        )
        view.add_argument(
            "--events",
            type=lambda text: [int(n) for n in text.split(",")],
            default=[1_000, 1_000_000],
            help="log sizes, e.g. 1000,1000000 (the default)",
        )
        view.add_argument("--seed", type=int, default=1)
        view.add_argument("--repeat", type=int, default=50, help="queries of each kind per size")
        view.add_argument("--processes", type=int, default=5, help="whole `allot` runs of each")
        view.add_argument(
            "--no-before", action="store_true", help="skip timing the fold in the client"
        )

        snapshot = add_bench(
            "snapshot",
            cmd_bench_snapshot,
            "a planner restart on a long log, with and without a snapshot",
        )
        snapshot.add_argument("--events", type=int, default=1_000_000)
        snapshot.add_argument("--seed", type=int, default=1)
        snapshot.add_argument(
            "--tail", type=int, default=0, help="events appended after the snapshot (default 0)"
        )

        chaos = add_bench(
            "chaos", cmd_bench_chaos, "kill -9 every kind of process under load, then check the log"
        )
        chaos.add_argument("--seconds", type=float, default=600, help="of load and kills")
        chaos.add_argument("--seed", type=int, default=1)
        chaos.add_argument("--kill-every", type=float, default=4.0, help="seconds between kills")
        chaos.add_argument(
            "--submit-every", type=float, default=1.0, help="mean seconds between submissions"
        )
        chaos.add_argument(
            "--settle", type=float, default=180.0, help="seconds for every job to end afterwards"
        )
        chaos.add_argument("--data-dir", help="keep the stack's files and the exported log here")
        chaos.add_argument(
            "--check", metavar="DIR", help="only check again the log a run kept in DIR (--data-dir)"
        )

        planner = add_bench("planner", cmd_bench_planner, "one planning cycle on a busy cluster")
        planner.add_argument("--nodes", type=int, default=1000, help="8-GPU nodes (default 1000)")
        planner.add_argument(
            "--pending",
            type=lambda text: [int(n) for n in text.split(",")],
            default=[10_000],
            help="queue sizes to measure, e.g. 1000,10000,50000 (default 10000)",
        )
        planner.add_argument("--seed", type=int, default=1)
        planner.add_argument("--repeat", type=int, default=20, help="cycles per queue size")

    if command is not None and command not in commands.choices:
        return build_parser()  # not a command: the whole parser says what the commands are
    return parser


def run_node_agent(argv: list[str]) -> None:
    """``allot node …`` is this host's node agent, its arguments the agent's: the process
    becomes the agent, so that a service manager's signals reach it."""
    os.execv(sys.executable, [sys.executable, "-m", "allot.services.node", *argv])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["node"]:
        run_node_agent(argv[1:])
    try:
        args = build_parser(argv[0] if argv else None).parse_args(argv)
    except _WholeParserNeeded:
        args = build_parser().parse_args(argv)
    if traced.exporting():  # as OTEL_* ask: a submission's trace begins here
        from allot.bus import tracing

        tracing.configure("cli")
    return failures.run(args.handler, args)


def run() -> NoReturn:
    """The ``allot`` program: ``main``, then out at once. Python's orderly shutdown, which
    frees every module and object one by one, was a sixth of a short command's time, and
    by then nothing is left to do but flush the output (and, where OTEL_* ask for it, the
    spans: then it exits the orderly way, which exports them)."""
    code = main()
    if traced.exporting():
        sys.exit(code)
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: the output is lost
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
