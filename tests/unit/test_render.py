"""What allot queue and allot explain print, from a folded state."""

import time

import msgspec
import pytest

from allot.bus.eventlog import Record
from allot.client import render
from allot.core import State
from allot.core.drain import fates
from allot.proto.events import (
    AccountSettings,
    BudgetGranted,
    Event,
    GpuInfo,
    JobCheckpointed,
    JobStarted,
    MaxWaitExceeded,
    NodeCordoned,
    NodeHealthChanged,
)
from tests import builders as b
from tests.builders import fold

HOUR = 3600 * 10**9
NOW = 10 * HOUR


def test_the_queue_shows_reasons_with_figures_and_max_wait_violations() -> None:
    late = MaxWaitExceeded(
        meta=b.meta(), job_id="big", account="lab", attempt=0, waited_ns=2 * HOUR, max_wait_ns=HOUR
    )
    state = fold(
        b.node("n1", 4),
        b.submitted("big", 4, workers=2, topology="rack", at=NOW - 2 * HOUR),
        b.submitted("small", 1, at=NOW),
        late,
    )
    rows = render.queue_rows(state, NOW)
    assert [(r["job_id"], r["gpus"], r["max_wait_exceeded"]) for r in rows] == [
        ("big", "2x4", True),
        ("small", "1", False),
    ]
    assert rows[0]["reason_text"] == "NO_FIT(need 8); free 4"
    assert rows[1]["reason_text"] == "admitted by the next plan"
    shown = render.queue_table(rows)
    assert "OVER MAX-WAIT" in shown.splitlines()[1]
    assert "OVER MAX-WAIT" not in shown.splitlines()[2]


def test_explain_names_where_a_gang_runs() -> None:
    state = fold(
        b.node("n1", 4),
        b.node("n2", 4),
        b.submitted("g", 4, workers=2),
        b.plan(b.admission("g", ("n1", [0, 1, 2, 3]), ("n2", [0, 1, 2, 3]))),
    )
    text = render.explain_text(render.explain(state, state.jobs["g"], NOW))
    assert "admitted to n1[0,1,2,3] n2[0,1,2,3], unfunded" in text


def test_nodes_show_islands_as_they_are_and_why_a_node_takes_no_work() -> None:
    assert render.spans([0, 1, 2, 3]) == "0-3"
    assert render.spans([6, 0, 2, 4]) == "0,2,4,6"
    assert render.spans([0, 1, 3]) == "0-1,3"
    state = b.fold(
        b.node("n1", 4, islands=[[0, 2], [1, 3]]),
        NodeHealthChanged(
            meta=b.meta(), node_id="n1", healthy=False, reason="XID 79", gpu=2, fault="xid"
        ),
        NodeCordoned(
            meta=b.meta(), node_id="n1", drain=True, reason="GPU 2: XID 79", by="telemetry",
            now=False,
        ),
    )  # fmt: skip
    [row] = [line for line in render.nodes_table(state.nodes).splitlines() if line.startswith("n1")]
    assert "healthy,draining" in row
    assert "0,2 1,3" in row
    assert "2:xid" in row
    assert "drain (by telemetry): GPU 2: XID 79" in row
    assert render.nodes_table(state.nodes).splitlines()[0].split()[-3:] == ["GPU", "FAULTS", "WHY"]


def test_the_jobs_that_ran_on_a_gpu_are_the_starts_the_log_took() -> None:
    node = msgspec.structs.replace(
        b.node("n1", 2),
        gpus=[GpuInfo(index=i, model="SIM", memory_mib=1, uuid=f"GPU-aaaa{i}") for i in (0, 1)],
    )
    other = msgspec.structs.replace(
        b.node("n2", 1), gpus=[GpuInfo(index=0, model="SIM", memory_mib=1, uuid="GPU-bbbb")]
    )

    def started(job: str, on: str, gpus: list[int], uuids: list[str]) -> JobStarted:
        return msgspec.structs.replace(b.started(job, on, gpus), gpu_uuids=uuids)

    events = [
        node,
        other,
        b.submitted("j1", 2),
        b.plan(("j1", "n1", [0, 1])),
        started("j1", "n1", [0, 1], ["GPU-aaaa0", "GPU-aaaa1"]),
        started("j1", "n1", [0, 1], ["GPU-aaaa0", "GPU-aaaa1"]),  # a duplicate
        started("j9", "n2", [0], ["GPU-aaaa1"]),  # no such job, and n1's GPU at that
        b.submitted("j2", 1),
        b.plan(("j2", "n2", [0])),
        started("j2", "n2", [0], ["GPU-aaaa1"]),  # a UUID n2's device does not have
    ]
    records = [
        Record(seq=n, subject="s", type=type(e).__name__, event=e)
        for n, e in enumerate(events, start=1)
    ]
    state, runs, known = render.runs_on(records, "GPU-aaaa1")
    assert [(r.job_id, r.node_id, r.device) for r in runs] == [("j1", "n1", 1)]
    assert known == {"GPU-aaaa1"}
    assert render.runs_on(records, "GPU-aaaa")[2] == {"GPU-aaaa0", "GPU-aaaa1"}
    text = render.gpu_runs(state, runs, "GPU-aaaa1")
    assert text.splitlines()[0] == "GPU 1 of n1: healthy"
    assert render.printable("XID 79\x1b[2J") == "XID 79?[2J"


def test_a_draining_node_shows_its_mode_and_what_each_of_its_jobs_waits_for() -> None:
    def on_n1(job_id: str, gpu: int, **spec: object) -> list[Event]:
        start = msgspec.structs.replace(b.started(job_id, "n1", [gpu]), meta=b.meta(NOW - HOUR))
        return [b.submitted(job_id, **spec), b.plan((job_id, "n1", [gpu])), start]

    jobs = [
        b.node("n1", 4),
        *on_n1("once", 0, max_runtime_ns=2 * HOUR),
        *on_n1("endless", 1),
        *on_n1("train", 2, resumable=True),
        JobCheckpointed(meta=b.meta(NOW - 60 * 10**9), job_id="train", node_id="n1",
                        path="/c", step=1),
    ]  # fmt: skip
    graceful = fold(*jobs, NodeCordoned(meta=b.meta(), node_id="n1", drain=True, now=False))
    hastened = fold(*jobs, NodeCordoned(meta=b.meta(), node_id="n1", drain=True, now=True))
    node = graceful.nodes["n1"]
    assert render.node_state(node) == "healthy,draining"
    assert render.node_state(hastened.nodes["n1"]) == "healthy,draining --now"
    assert render.why_unavailable(node) == "drain: -; waits for endless, once, train"
    assert render.why_unavailable(hastened.nodes["n1"]).startswith("drain --now: -; waits for")
    # As the read model serves it: what keeps work off the node, with every job's fate.
    why = {"n1": render.node_view(node, graceful)["why"]}
    [row] = [r for r in render.nodes_table(graceful.nodes, why).splitlines() if r.startswith("n1")]
    assert "endless (left to finish, no max_runtime)" in row
    assert f"once (left to finish, by {render.when(NOW + HOUR)} at most)" in row
    assert "train (to stop at a checkpoint)" in row
    # What a drain --now would lose, said before it is asked for.
    lost = render.drain_losses(fates(graceful, "n1", immediate=True), NOW)
    assert lost == [
        "endless: cannot resume, its 1h of work is lost",
        "once: cannot resume, its 1h of work is lost",
        "train: resumes elsewhere, losing the 1m since its last checkpoint",
    ]


def test_durations_are_shown_as_people_write_them() -> None:
    assert render.human_duration(4983 * 10**9) == "1h23m"  # short: the largest two units
    assert render.human_duration(4983 * 10**9, units=None) == "1h23m3s"
    state = fold(b.node("n1", 1), b.submitted("long", 4, at=NOW - 4983 * 10**9))
    rows = render.queue_rows(state, NOW)
    [line] = render.queue_table(rows).splitlines()[1:]
    assert " 1h23m " in line, line
    assert "4983s" not in line


def test_an_accounts_max_wait_is_a_duration() -> None:
    state = State()
    state.accounts["lab"] = AccountSettings(weight=1, max_wait_ns=90 * 60 * 10**9)
    [row] = render.accounts_table(state.accounts).splitlines()[1:]
    assert row.split()[-1] == "1h30m"


def test_a_job_killed_in_its_grace_says_how_long_it_needed() -> None:
    state = fold(b.submitted("j", 1))
    job = msgspec.structs.replace(state.jobs["j"], grace_too_short_ns=95 * 10**9)
    assert "it needed 1m35s and was killed" in render.job_detail(job)
    assert "grace period (30s)" in render.job_detail(job)


def test_times_have_a_date_and_a_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    at = 1_796_310_245 * 10**9 + 123_000_000  # 2026-12-03 15:04:05.123 UTC
    for zone, shown in [
        ("UTC", "2026-12-03 15:04:05+00:00"),
        ("Asia/Kolkata", "2026-12-03 20:34:05+05:30"),
        ("America/New_York", "2026-12-03 10:04:05-05:00"),
    ]:
        monkeypatch.setenv("TZ", zone)
        time.tzset()
        assert render.when(at) == shown
    monkeypatch.undo()
    time.tzset()
    assert render.when(None) == "-"


def test_budget_rows_show_what_running_work_has_promised_of_the_budget() -> None:
    granted = BudgetGranted(
        meta=b.meta(), path="lab", gpu_ms=10 * 3_600_000, period_ns=168 * HOUR, starts_at=0
    )
    funded = msgspec.structs.replace(b.admission("j", ("n1", [0, 1])), funded=True)
    started = b.started("j", "n1", [0, 1])
    state = fold(
        b.node("n1", 4),
        granted,
        b.submitted("j", 2, account="lab/team", min_runtime_ns=HOUR),
        b.plan(funded),
        msgspec.structs.replace(started, meta=b.meta(NOW - HOUR // 4)),
    )
    rows = {row["account"]: row for row in render.budget_rows(state, NOW, 168 * HOUR)}
    # Two GPUs for the hour of protection its funding bought: nothing charged yet.
    assert rows["lab"]["budget_promised_gpu_hours"] == 2
    assert rows["lab"]["budget_left_gpu_hours"] == 10
    assert rows["lab/team"]["budget_promised_gpu_hours"] is None  # no budget of its own
    shown = render.budget_table(list(rows.values())).splitlines()
    [lab] = [line.split() for line in shown if line.split()[:1] == ["lab"]]
    assert lab[-2:] == ["2.00", "10.00"]  # promised, then left
    # Rows from a view service that does not send what is promised yet.
    older = [
        {k: v for k, v in row.items() if k != "budget_promised_gpu_hours"} for row in rows.values()
    ]
    [lab] = [
        line.split() for line in render.budget_table(older).splitlines() if line.startswith("lab ")
    ]
    assert lab[-2:] == ["-", "10.00"]


def test_an_account_granted_a_budget_is_listed_before_it_runs_anything() -> None:
    granted = BudgetGranted(
        meta=b.meta(), path="lab/new", gpu_ms=10 * 3_600_000, period_ns=168 * HOUR, starts_at=0
    )
    state = fold(b.node("n1", 4), b.submitted("j", 1), granted)  # j: an account of its own
    rows = render.budget_rows(state, NOW, 168 * HOUR)
    [new] = [row for row in rows if row["account"] == "lab/new"]
    assert new["budget_gpu_hours"] == 10
    assert new["budget_left_gpu_hours"] == 10
    assert new["usage_gpu_hours_in_window"] == 0
    assert "new" in render.budget_table(rows)
    assert len(rows) == len({row["account"] for row in rows})  # each account once
