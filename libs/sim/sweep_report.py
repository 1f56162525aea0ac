"""What a sweep reports: markdown tables of the spread of the metrics per policy (over all
runs and per demand level), the per-slice check of ``allot``'s criteria with the slices
that fail them, a JSON file of every run and a PNG of the distributions (matplotlib,
``pip install -e '.[sim]'``)."""

import json
from pathlib import Path
from typing import Any

from allot.sim.report import ReportError
from allot.sim.sweep import (
    CHECKED_POLICY,
    JUDGED,
    OCCUPANCY_FLOOR,
    OCCUPANCY_FROM_DEMAND,
    WORST_ACCOUNT_FLOOR,
    Failure,
    summary,
)

LABELS = {
    "occupancy": "occupancy",
    "owed_delivered_overall": "owed/delivered overall",
    "owed_delivered_min_account": "worst account owed/delivered",
    "debug_wait_p90_s": "interactive p90 wait",
}
CRITERIA = {
    "a": f"worst-account owed/delivered >= {WORST_ACCOUNT_FLOOR} in every run",
    "b": f"occupancy >= {OCCUPANCY_FLOOR} where demand >= {OCCUPANCY_FROM_DEMAND:g}x",
    "c": "no baseline matches or beats it on all four metrics in any run",
}


def _value(key: str, value: float) -> str:
    if not key.endswith("_s"):
        return f"{value:.3f}"
    for unit, seconds in (("d", 86400), ("h", 3600), ("min", 60)):
        if value >= seconds:
            return f"{value / seconds:.1f} {unit}"
    return f"{value:.0f} s"


def spread_table(rows: list[dict[str, Any]]) -> str:
    """Per policy: each judged metric's minimum, median and p10-p90 (nearest rank)."""
    lines = [
        "| policy | runs | "
        + " | ".join(f"{LABELS[k]}: min / median / p10-p90" for k, _ in JUDGED)
        + " |",
        "|---|---:|" + "---|" * len(JUDGED),
    ]  # fmt: skip
    for policy, metrics in summary(rows).items():
        runs = sum(r["policy"] == policy for r in rows)
        cells = [
            f"{_value(k, s['min'])} / {_value(k, s['median'])} / "
            f"{_value(k, s['p10'])}-{_value(k, s['p90'])}"
            for k, s in ((k, metrics[k]) for k, _ in JUDGED)
        ]
        lines.append(f"| {policy} | {runs} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def check_table(rows: list[dict[str, Any]], found: list[Failure]) -> str:
    """One line per slice and demand level: ``allot``'s judged metrics and the criteria."""
    failed = {(f.slice, f.demand, f.criterion): f for f in found}
    lines = [
        "| slice | demand | worst account | worst o/d | occupancy | overall o/d "
        "| interactive p90 | load in span | idle: reserved / too small / unplaced | a | b | c |",
        "|---|---:|---|---:|---:|---:|---:|---:|---|---|---|---|",
    ]
    for r in rows:
        if r["policy"] != CHECKED_POLICY:
            continue
        marks = []
        for criterion in "abc":
            checked = criterion != "b" or r["demand"] >= OCCUPANCY_FROM_DEMAND
            miss = (r["slice"], r["demand"], criterion) in failed
            marks.append("FAIL" if miss else "ok" if checked else "n/a")
        lines.append(
            f"| {r['slice']} | {r['demand']:g}x | {r['worst_account']} "
            f"| {r['owed_delivered_min_account']:.3f} | {r['occupancy']:.3f} "
            f"| {r['owed_delivered_overall']:.3f} "
            f"| {_value('debug_wait_p90_s', r['debug_wait_p90_s'])} "
            f"| {r['load_in_span']:.2f} "
            f"| {r['idle_reserved']:.3f} / {r['idle_too_small']:.3f} / {r['idle_unplaced']:.3f} "
            f"| {' | '.join(marks)} |"
        )
    return "\n".join(lines)


def verdict(rows: list[dict[str, Any]], found: list[Failure]) -> str:
    """PASS or FAIL per criterion, and the runs that fail each."""
    if not any(r["policy"] == CHECKED_POLICY for r in rows):
        return f"criteria: {CHECKED_POLICY} was not among the policies; nothing checked"
    checked = [r for r in rows if r["policy"] == CHECKED_POLICY]
    # The runs each criterion applies to: (b) only from its demand on, (c) only where a
    # baseline ran beside it.
    applies = {
        "a": len(checked),
        "b": sum(r["demand"] >= OCCUPANCY_FROM_DEMAND for r in checked),
        "c": len(checked) if any(r["policy"] != CHECKED_POLICY for r in rows) else 0,
    }
    lines = []
    for criterion, rule in CRITERIA.items():
        mine = [f for f in found if f.criterion == criterion]
        runs = applies[criterion]
        state = (
            "not checked: no run it applies to" if not runs
            else "PASS" if not mine
            else f"FAIL in {len(mine)} of {runs} runs"
        )  # fmt: skip
        lines.append(f"- ({criterion}) {rule}: **{state}**")
        lines += [f"  - {f.slice} @ {f.demand:g}x: {f.detail}" for f in mine]
    overall = "PASS" if not found else "FAIL"
    return f"{CHECKED_POLICY} criteria: **{overall}**\n\n" + "\n".join(lines)


def markdown(
    rows: list[dict[str, Any]], found: list[Failure], header: str, demands: list[float]
) -> str:
    parts = [header, "## All runs", spread_table(rows)]
    for level in demands:
        parts += [f"## Demand {level:g}x", spread_table([r for r in rows if r["demand"] == level])]
    if any(r["policy"] == CHECKED_POLICY for r in rows):
        parts += [f"## {CHECKED_POLICY}, slice by slice", check_table(rows, found)]
    parts += ["## Criteria", verdict(rows, found)]
    return "\n\n".join(parts) + "\n"


def write_json(path: Path, about: dict[str, Any], rows: list[dict[str, Any]],
               found: list[Failure]) -> None:  # fmt: skip
    written = {
        **about,
        "summary": summary(rows),
        "failures": [{"criterion": f.criterion, "slice": f.slice, "demand": f.demand,
                      "detail": f.detail} for f in found],
        "runs": rows,
    }  # fmt: skip
    path.write_text(json.dumps(written, indent=2, sort_keys=True) + "\n")


def pyplot() -> Any:
    """matplotlib's pyplot, drawing to files only."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only, no display
        import matplotlib.pyplot as plt
    except ImportError:
        needed = "allot sim sweep --out needs matplotlib: pip install -e '.[sim]'"
        raise ReportError(needed) from None
    return plt


def write_plot(path: Path, rows: list[dict[str, Any]], demands: list[float]) -> None:
    """Box plots per policy of each judged metric (columns), over all runs and per demand
    level (rows), each run a dot over its box."""
    plt = pyplot()
    policies = list(dict.fromkeys(r["policy"] for r in rows))
    groups = [("all runs", rows)] + [
        (f"demand {d:g}x", [r for r in rows if r["demand"] == d]) for d in demands
    ]
    figure, axes = plt.subplots(
        len(groups), len(JUDGED), figsize=(4.2 * len(JUDGED), 3.2 * len(groups)), squeeze=False
    )
    for row_axes, (title, group) in zip(axes, groups, strict=True):
        for ax, (key, _) in zip(row_axes, JUDGED, strict=True):
            data = [[max(r[key], 1.0) if key.endswith("_s") else r[key] for r in group
                     if r["policy"] == p] for p in policies]  # fmt: skip
            ax.boxplot(data, showfliers=False)
            for n, values in enumerate(data, start=1):
                # Spread the dots sideways by their rank: no randomness, the same picture.
                offsets = [(i % 7 - 3) * 0.04 for i in range(len(values))]
                ax.plot([n + o for o in offsets], values, ".", alpha=0.5, markersize=4)
            ax.set_xticks(range(1, len(policies) + 1), policies, fontsize=8)
            if key.endswith("_s"):
                ax.set_yscale("log")
                ax.set_ylabel("s (log; under 1 s drawn at 1)", fontsize=8)
            ax.set_title(f"{LABELS[key]} ({title})", fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)
