"""An HTML report of simulated runs side by side, with PNG plots: wait CDFs per policy and
tier, delivered/owed per account, GPUs in use over time. Needs matplotlib
(``pip install -e '.[sim]'``)."""

import html
from pathlib import Path
from typing import Any

from allot.sim.metrics import HOUR_S, JobOutcome, down_by_hour, wait_s
from allot.sim.simulator import down_spans
from allot.sim.trace import NodeOutage

TIERS = ("interactive", "batch", "best-effort")


class ReportError(Exception):
    """The report cannot be written; the message says what to do."""


def write_report(
    runs: list[tuple[dict[str, Any], list[JobOutcome]]],
    out: Path,
    table: str,
    fill: str,
    outages: list[NodeOutage] | None = None,
    gpus_per_node: int = 0,
) -> Path:
    """``outages``: the nodes' failures, of ``gpus_per_node`` GPUs each, drawn as the GPUs
    there were."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only, no display
        import matplotlib.pyplot as plt
    except ImportError:
        raise ReportError("--report needs matplotlib: pip install -e '.[sim]'") from None
    out.mkdir(parents=True, exist_ok=True)

    figure, axes = plt.subplots(1, len(TIERS), figsize=(15, 4), sharey=True)
    for ax, tier in zip(axes, TIERS, strict=True):
        for metrics, outcomes in runs:
            end = max(o.end_s if o.end_s is not None else o.submit_s for o in outcomes)
            waits = sorted(wait_s(o, end) for o in outcomes if o.tier == tier)
            if waits:
                ax.step(
                    [max(w, 1.0) for w in waits],
                    [(n + 1) / len(waits) for n in range(len(waits))],
                    label=metrics["policy"],
                )
        ax.set(xscale="log", xlabel="wait (s)", title=f"{tier} jobs")
    axes[0].set_ylabel("share of jobs waiting at most this long")
    drawn = [ax for ax in axes if ax.get_lines()]  # a trace may have no jobs of a tier
    if drawn:
        drawn[-1].legend()
    figure.savefig(out / "waits.png", dpi=90, bbox_inches="tight")
    plt.close(figure)

    accounts = sorted({a for metrics, _ in runs for a in metrics["per_account"]})
    figure, ax = plt.subplots(figsize=(max(6, len(accounts) * 0.8), 4))
    width = 0.8 / len(runs)
    for n, (metrics, _) in enumerate(runs):
        ratios = [metrics["per_account"].get(a, {}).get("owed_delivered", 0) for a in accounts]
        ax.bar(
            [i + n * width for i in range(len(accounts))], ratios, width, label=metrics["policy"]
        )
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_xticks(
        [i + 0.4 - width / 2 for i in range(len(accounts))], accounts, rotation=45, ha="right"
    )
    ax.set(ylabel="delivered / owed GPU-hours")
    ax.legend()
    figure.savefig(out / "owed_delivered.png", dpi=90, bbox_inches="tight")
    plt.close(figure)

    figure, ax = plt.subplots(figsize=(10, 4))
    last = 0
    for metrics, outcomes in runs:
        hours, used = _in_use(outcomes)
        ax.plot(hours, used, label=metrics["policy"], linewidth=0.8)
        last = max([last, *hours])
    missing = down_by_hour(down_spans(outages or [], gpus_per_node, (last + 1) * HOUR_S))
    there = [runs[0][0]["gpus"] - missing.get(h, 0.0) / HOUR_S for h in range(last + 1)]
    ax.step(range(last + 1), there, where="post", color="grey", linewidth=0.8, label="GPUs up")
    ax.set(xlabel="hour", ylabel="GPUs in use (hourly mean)")
    ax.legend()
    figure.savefig(out / "occupancy.png", dpi=90, bbox_inches="tight")
    plt.close(figure)

    page = out / "report.html"
    page.write_text(
        "<!doctype html><meta charset=utf-8><title>Allot simulation</title>"
        "<h1>Policies side by side</h1>"
        f"<p>{html.escape(fill)}</p><pre>{html.escape(table)}</pre>"
        '<h2>Waits</h2><img src="waits.png" alt="wait CDFs per tier">'
        '<h2>Delivered / owed per account</h2><img src="owed_delivered.png" alt="ratios">'
        '<h2>GPUs in use</h2><img src="occupancy.png" alt="occupancy over time">\n'
    )
    return page


def _in_use(outcomes: list[JobOutcome]) -> tuple[list[int], list[float]]:
    """GPUs in use, averaged over each hour."""
    per_hour: dict[int, float] = {}
    for o in outcomes:
        for start, stop in o.runs:
            hour = int(start // HOUR_S)
            while hour * HOUR_S < stop:
                overlap = min(stop, (hour + 1) * HOUR_S) - max(start, hour * HOUR_S)
                per_hour[hour] = per_hour.get(hour, 0.0) + o.gpus * overlap / HOUR_S
                hour += 1
    hours = sorted(per_hour)
    return hours, [per_hour[h] for h in hours]
