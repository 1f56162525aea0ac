"""Traces in one canonical form, and what is filled where a trace is silent."""

from pathlib import Path

import msgspec
import pytest

from allot.bus.codec import encode
from allot.proto.events import Event, NodeLost
from allot.proto.subjects import subject_for
from allot.sim.trace import (
    Fill,
    NodeOutage,
    TraceError,
    TraceJob,
    check_outages,
    filled,
    load,
    load_trace,
    read_outages,
)
from tests import builders as b

SECOND = 10**9
TRACES = Path(__file__).resolve().parents[3] / "shared" / "data" / "traces"


def test_a_canonical_trace_reads_every_column_and_fills_the_rest(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text(
        "job_id,submit_s,duration_s,gpus,account,tier,resumable,checkpoint_interval_s,workers\n"
        "b,10,7200,8,lab/a,,true,600,2\n"
        "a,0,60,1,lab/b,,,,\n"
        "\n"
    )
    jobs = filled(load(tmp_path / "t.csv", "canonical"), Fill(seed=3))
    assert [j.job_id for j in jobs] == ["a", "b"]  # by submission
    a, b = jobs
    assert (a.tier, a.resumable, a.max_runtime_s) == ("interactive", False, 3600.0)
    assert (b.tier, b.resumable, b.workers, b.checkpoint_interval_s) == ("batch", True, 2, 600.0)
    assert b.max_runtime_s == 7200.0


@pytest.mark.parametrize(
    ("row", "words"),
    [
        ("x,0,ten,1,a", "duration_s='ten' is not a number"),
        ("x,0,10,0,a", "gpus=0 must be at least 1"),
        ("x,-5,10,1,a", "submit_s=-5 cannot be negative"),
    ],
)
def test_a_bad_row_names_the_file_line_and_field(tmp_path: Path, row: str, words: str) -> None:
    (tmp_path / "t.csv").write_text("job_id,submit_s,duration_s,gpus,account\n" + row + "\n")
    with pytest.raises(TraceError, match=words):
        load(tmp_path / "t.csv", "canonical")


def test_the_fill_is_seeded_and_the_same_seed_fills_the_same() -> None:
    jobs = [
        TraceJob(job_id=f"j{n}", submit_s=n, duration_s=4000, gpus=4, account="a")
        for n in range(200)
    ]
    first, again = filled(jobs, Fill(seed=5)), filled(jobs, Fill(seed=5))
    assert first == again
    share = sum(j.resumable for j in first) / len(first)
    assert 0.5 < share < 0.7  # the 60% asked for
    assert first != filled(jobs, Fill(seed=6))
    assert "60% of batch jobs resumable" in Fill().describe()


@pytest.mark.skipif(not TRACES.exists(), reason=f"the shared traces are not at {TRACES}")
def test_the_philly_and_alibaba_traces_load() -> None:
    philly = load(TRACES / "philly.csv", "philly")
    assert len(philly) == 82_247
    assert min(j.submit_s for j in philly) == 0
    assert len({j.account for j in philly}) == 15
    wide = [j for j in philly if j.workers > 1]
    assert all(j.gpus == 8 for j in wide)
    alibaba = load(TRACES / "alibaba-openb-pods.csv", "alibaba")
    assert 0 < len(alibaba) <= 8152
    assert any(j.tier == "best-effort" for j in alibaba)


def test_node_events_read_sorted_and_each_must_name_a_node_of_the_cluster(
    tmp_path: Path,
) -> None:
    (tmp_path / "n.csv").write_text("node,down_s,up_s\n3,500,\n0,100,200\n0,300,400\n")
    outages = read_outages(tmp_path / "n.csv")
    assert outages == [
        NodeOutage(node=0, down_s=100, up_s=200),
        NodeOutage(node=0, down_s=300, up_s=400),
        NodeOutage(node=3, down_s=500, up_s=None),
    ]
    check_outages(outages, nodes=4)
    with pytest.raises(TraceError, match="node=3 is not in a cluster of 3 nodes"):
        check_outages(outages, nodes=3)
    for overlapping, words in (
        ([(0, 10, None), (0, 50, 60)], "node 0 goes down at down_s=50 while still down since"),
        ([(0, 20, 40), (0, 10, 30)], "node 0 goes down at down_s=20 while still down since"),
    ):
        with pytest.raises(TraceError, match=words):
            check_outages([NodeOutage(node=n, down_s=d, up_s=u) for n, d, u in overlapping], 4)


@pytest.mark.parametrize(
    ("rows", "words"),
    [
        ("1.5,10,20", "node='1.5' is not a node index"),
        ("-1,10,20", "node=-1 cannot be negative"),
        ("0,20,10", "up_s=10 must be after down_s=20"),
        ("0,nan,10", "down_s='nan' is not a number"),
        ("inf,10,20", "node='inf' is not a number"),
        ("0,10,inf", "up_s='inf' is not a number"),
    ],
)
def test_bad_node_events_name_the_line_and_field(tmp_path: Path, rows: str, words: str) -> None:
    (tmp_path / "n.csv").write_text("node,down_s,up_s\n" + rows + "\n")
    with pytest.raises(TraceError, match=words):
        read_outages(tmp_path / "n.csv")


def write_log(path: Path, events: list[Event]) -> None:
    lines = [
        msgspec.json.encode({"seq": n, "subject": subject_for(e), "event": msgspec.Raw(encode(e))})
        for n, e in enumerate(events, start=1)
    ]
    path.write_bytes(b"\n".join(lines) + b"\n")


def test_node_failures_are_extracted_from_an_exported_log(tmp_path: Path) -> None:
    def lost(node: str, at: int, last_seen: int) -> NodeLost:
        return NodeLost(meta=b.meta(at), node_id=node, last_seen_ns=last_seen, timeout_ns=SECOND)

    def back(node: str, at: int) -> Event:
        return msgspec.structs.replace(b.node(node, 4), meta=b.meta(at))

    events = [
        back("n1", 0),
        back("n2", 0),
        b.submitted("j", 1, at=10 * SECOND),
        lost("n2", 60 * SECOND, 50 * SECOND),  # numbered 1: registered second
        back("n2", 90 * SECOND),
        lost("n1", 200 * SECOND, 190 * SECOND),  # and never back
    ]
    write_log(tmp_path / "log.jsonl", events)
    assert load_trace(tmp_path / "log.jsonl", "allot-log")[1] == [
        NodeOutage(node=0, down_s=180.0, up_s=None),
        NodeOutage(node=1, down_s=40.0, up_s=80.0),
    ]
    (tmp_path / "t.csv").write_text("job_id,submit_s,duration_s,gpus,account\na,0,1,1,x\n")
    assert load_trace(tmp_path / "t.csv", "canonical")[1] == []

    # A node lost again before its first heartbeat since it came back is reported as last
    # seen before it registered: it is down from its registration, not twice at once.
    write_log(tmp_path / "again.jsonl", [*events[:5], lost("n2", 300 * SECOND, 50 * SECOND)])
    again = load_trace(tmp_path / "again.jsonl", "allot-log")[1]
    assert again == [
        NodeOutage(node=1, down_s=40.0, up_s=80.0),
        NodeOutage(node=1, down_s=80.0, up_s=None),
    ]
    check_outages(again, nodes=2)


def test_a_trace_is_extracted_from_an_exported_log(tmp_path: Path) -> None:
    events = [
        b.node("n1", 4),
        b.submitted("ran", 2, at=10 * SECOND, tier="interactive", resumable=True),
        b.submitted("waits", 1, at=20 * SECOND),
        b.plan(("ran", "n1", [0, 1])),
        msgspec.structs.replace(b.started("ran", "n1", [0, 1]), meta=b.meta(30 * SECOND)),
        msgspec.structs.replace(b.exited("ran", "n1"), meta=b.meta(130 * SECOND)),
    ]
    write_log(tmp_path / "log.jsonl", events)
    [job] = load(tmp_path / "log.jsonl", "allot-log")
    assert (job.job_id, job.submit_s, job.duration_s, job.gpus) == ("ran", 0.0, 100.0, 2)
    assert (job.tier, job.resumable, job.account) == ("interactive", True, "lab/team")
