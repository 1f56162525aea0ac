"""``allot sim sweep``: the robustness sweep of ``allot.sim.sweep`` from the command line.

Always exits 0 once the sweep ran (it is a measurement; the report says PASS or FAIL);
2, with one line naming the option, for options it cannot take."""

import argparse
import os
import sys
import time
from pathlib import Path

from allot.core.policytoml import PolicyError
from allot.sim.cli import chosen
from allot.sim.report import ReportError
from allot.sim.slices import (
    CLUSTER,
    MAX_JOBS,
    QUICK_JOBS,
    Slice,
    default_slices,
    spread_pick,
)
from allot.sim.sweep import DEFAULT_DEMANDS, failures, print_progress, sweep
from allot.sim.sweep_report import markdown, pyplot, write_json, write_plot

QUICK_SLICES = 3  # one of each family, where the traces are there


class OptionError(Exception):
    """A bad option: the message names it, its value and what is accepted."""


def _whole(option: str, text: str | None, default: int) -> int:
    if text is None:
        return default
    if not text.isdigit() or int(text) < 1:
        raise OptionError(f"{option} {text!r}: a whole number of at least 1")
    return int(text)


def _demands(text: str | None) -> list[float]:
    if text is None:
        return list(DEFAULT_DEMANDS)
    levels = []
    for part in text.split(","):
        try:
            level = float(part)
        except ValueError:
            level = float("nan")
        if not 0 < level < float("inf"):
            raise OptionError(
                f"--demand {text!r}: comma-separated multiples of the cluster's supply, "
                "each above 0, e.g. 1.5,2,3"
            )
        levels.append(level)
    return list(dict.fromkeys(levels))


def cmd_sweep(args: argparse.Namespace) -> int:
    try:
        workers = _whole("--jobs", args.jobs, os.cpu_count() or 1)
        demands = _demands(args.demand)
        max_slices = _whole("--slices", args.slices, QUICK_SLICES if args.quick else 10**9)
    except OptionError as error:
        print(f"allot: {error}", file=sys.stderr)
        return 2
    try:
        policies = chosen(args.policies.split(","))
    except PolicyError as error:
        print(f"allot: --policies {args.policies!r}: {error}", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else None
    if out is not None:
        try:
            pyplot()  # there, before the sweep's minutes of work rather than after
        except ReportError as error:
            print(f"allot: {error}", file=sys.stderr)
            return 2
    max_jobs = QUICK_JOBS if args.quick else MAX_JOBS
    traces = Path(args.traces)
    slices, notes = default_slices(traces, CLUSTER, max_jobs)
    for note in notes:
        print(f"sweep: {note}", file=sys.stderr)
    if notes and not any(s.family != "synthetic" for s in slices):
        print("sweep: synthetic slices only", file=sys.stderr)
    slices = spread_pick(slices, max_slices)
    started = time.perf_counter()
    print(
        f"sweep: {len(slices)} slices x {len(demands)} demand levels x {len(policies)} "
        f"policies on {workers} worker processes",
        file=sys.stderr,
    )
    rows = sweep(slices, demands, policies, CLUSTER, workers, print_progress)
    wall = time.perf_counter() - started
    found = failures(rows)
    cluster = f"{CLUSTER.nodes}x{CLUSTER.gpus_per_node}"
    header = (
        f"# allot sim sweep\n\n{len(slices)} slices ({_families(slices)}) x demand "
        f"{', '.join(f'{d:g}x' for d in demands)} x {len(policies)} policies = {len(rows)} "
        f"runs on {cluster} GPUs, at most {max_jobs} jobs a slice; {wall:.0f} s on "
        f"{workers} worker processes. Spread: min / median / p10-p90 (nearest rank) over "
        "the runs."
        + "".join(f"\n\nNote: {n}." for n in notes)
    )  # fmt: skip
    text = markdown(rows, found, header, demands)
    sys.stdout.write(text)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        about = {
            "cluster": cluster,
            "max_jobs_per_slice": max_jobs,
            "demands": demands,
            "policies": [name for name, _ in policies],
            "slices": [{"name": s.name, "family": s.family, "jobs": len(s.jobs),
                        "fill": s.fill.describe()} for s in slices],
            "notes": notes,
        }  # fmt: skip
        (out / "sweep.md").write_text(text)
        write_json(out / "sweep.json", about, rows, found)
        write_plot(out / "sweep.png", rows, demands)
        print(f"sweep: wrote {out}/sweep.md, sweep.json and sweep.png", file=sys.stderr)
    return 0


def _families(slices: list[Slice]) -> str:
    counts: dict[str, int] = {}
    for one in slices:
        counts[one.family] = counts.get(one.family, 0) + 1
    return ", ".join(f"{n} {family}" for family, n in counts.items())
