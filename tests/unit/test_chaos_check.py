"""The chaos suite's invariants over hand-built logs: a clean history passes, and a log that
breaks each invariant is caught, with the job and the sequence where it broke."""

from pathlib import Path

import msgspec
import pytest

from allot.bus.eventlog import Record
from allot.client.bench_chaos import check_again
from allot.client.bench_replay import write_history
from allot.client.chaos import started_on_disk
from allot.client.chaos_check import Verdict, check
from allot.client.logfile import read_log
from allot.proto.events import (
    Event,
    JobCheckpointed,
    JobRequeued,
    JobStarted,
    PlanComputed,
    StopRequested,
)
from allot.services.runtime import code_version
from tests.builders import (
    admission,
    exited,
    lost,
    meta,
    node,
    plan,
    preempted,
    started,
    submitted,
)


def records(*events: Event) -> list[Record]:
    return [
        Record(seq=seq, subject="", type=str(type(e).__struct_config__.tag), event=e)
        for seq, e in enumerate(events, start=1)
    ]


def run(job_id: str, node_id: str, gpus: list[int], pid: int, attempt: int = 0) -> JobStarted:
    return msgspec.structs.replace(started(job_id, node_id, gpus), pid=pid, attempt=attempt)


def checkpoint(job_id: str, step: int) -> JobCheckpointed:
    return JobCheckpointed(meta=meta(), job_id=job_id, node_id="n1", path="/c", step=step)


def invariants(verdict: Verdict) -> list[tuple[str, str, int]]:
    return [(f.invariant, f.job_id, f.seq) for f in verdict.findings]


# A job acknowledged under key k1, run to its end with two checkpoints.
CLEAN: tuple[Event, ...] = (
    node("n1", 2),
    submitted("j1", key="k1", resumable=True),
    plan(("j1", "n1", [0])),
    run("j1", "n1", [0], pid=10),
    checkpoint("j1", 1),
    checkpoint("j1", 2),
    exited("j1", "n1"),
)


def test_a_clean_history_passes() -> None:
    verdict = check(records(*CLEAN), {"k1": "j1"})
    assert verdict.findings == []
    assert (verdict.acknowledged, verdict.lost, verdict.duplicated) == (1, 0, 0)
    assert verdict.ended == {"succeeded": 1}


def test_an_acknowledged_submission_missing_from_the_log_is_lost() -> None:
    verdict = check(records(*CLEAN), {"k1": "j1", "k2": "j2"})
    assert invariants(verdict) == [("acknowledged", "j2", 0)]
    assert verdict.lost == 1


def test_a_key_submitted_twice_is_a_duplicate() -> None:
    twice = submitted("j9", key="k1")
    verdict = check(
        records(*CLEAN, twice, plan(("j9", "n1", [1])), exited("j9", "n1")), {"k1": "j1"}
    )
    assert verdict.duplicated == 1
    assert ("acknowledged", "j1", 8) in invariants(verdict)


def test_a_submission_logged_under_another_job_id_is_caught() -> None:
    verdict = check(records(*CLEAN), {"k1": "j-other"})
    assert invariants(verdict) == [("acknowledged", "j-other", 2)]


def test_a_job_left_running_has_not_ended() -> None:
    verdict = check(records(*CLEAN[:-1]), {"k1": "j1"})
    assert invariants(verdict) == [("ended", "j1", 0)]
    assert verdict.not_ended == 1


def test_an_attempt_started_twice_is_caught() -> None:
    again = run("j1", "n1", [0], pid=11)
    verdict = check(records(*CLEAN[:4], again, *CLEAN[4:]), {"k1": "j1"})
    assert invariants(verdict) == [("started-once", "j1", 5)]


def test_the_same_start_reported_again_is_no_second_start() -> None:
    verdict = check(records(*CLEAN[:4], CLEAN[3], *CLEAN[4:]), {"k1": "j1"})
    assert verdict.findings == []


def test_a_process_started_on_a_gpu_another_job_runs_on_is_caught() -> None:
    # j2 is allotted GPU 1, but its agent starts it on GPU 0, where j1 runs.
    events = (
        *CLEAN[:4],
        submitted("j2"),
        plan(("j2", "n1", [1])),
        run("j2", "n1", [0], pid=20),
        exited("j2", "n1"),
        *CLEAN[4:],
    )
    verdict = check(records(*events), {"k1": "j1"})
    assert ("one-holder", "j2", 7) in invariants(verdict)


def test_a_gpu_allotted_while_another_jobs_process_still_runs_there_is_caught() -> None:
    # A gang fails on one node; the fold frees its GPUs on both, but the process on the
    # other node has not ended when a plan gives its GPU to j2.
    gang = submitted("j1", workers=2, key="k1")
    events = (
        node("n1", 1),
        node("n2", 1),
        gang,
        plan(admission("j1", ("n1", [0]), ("n2", [0]))),
        run("j1", "n1", [0], pid=10),
        run("j1", "n2", [0], pid=11),
        exited("j1", "n1", code=1),
        submitted("j2"),
        plan(("j2", "n2", [0])),
    )
    verdict = check(records(*events), {"k1": "j1"})
    assert ("one-holder", "j2", 9) in invariants(verdict)


def test_a_checkpoint_that_goes_back_is_lost_work() -> None:
    # Preempted and requeued, the next attempt numbers its checkpoints from 1 again: the
    # files of the first attempt were not there for it to resume from.
    events = (
        *CLEAN[:6],
        StopRequested(meta=meta(), job_id="j1", grace_ns=10, reason="preempted", attempt=0),
        msgspec.structs.replace(exited("j1", "n1"), stopped_in_ns=5),
        preempted("j1"),
        JobRequeued(meta=meta(), job_id="j1", reason="preempted"),
        plan(("j1", "n1", [1])),
        run("j1", "n1", [1], pid=11, attempt=1),
        checkpoint("j1", 1),
        msgspec.structs.replace(exited("j1", "n1"), attempt=1),
    )
    verdict = check(records(*events), {"k1": "j1"})
    assert invariants(verdict) == [("checkpoint-kept", "j1", 13)]
    assert verdict.ended == {"succeeded": 1}


def test_an_older_checkpoint_reported_late_is_no_lost_work() -> None:
    # Seen by the agent before checkpoint 7 but stored after it (its append was retried
    # across a NATS restart): a late report, not a job that went back.
    late = msgspec.structs.replace(checkpoint("j1", 2), meta=meta(at=1_500))
    events = (
        *CLEAN[:4],
        msgspec.structs.replace(checkpoint("j1", 1), meta=meta(at=1_000)),
        msgspec.structs.replace(checkpoint("j1", 7), meta=meta(at=2_000)),
        exited("j1", "n1"),
        late,
    )
    verdict = check(records(*events), {"k1": "j1"})
    assert verdict.findings == []


def test_a_process_the_nodes_ran_that_the_log_never_started_is_caught() -> None:
    # The node's disk shows attempt 0 of j1 ran on n1 (as the log says) and also on n2,
    # which the log never recorded.
    ran = [("j1", 0, "n1"), ("j1", 0, "n2")]
    verdict = check(records(*CLEAN), {"k1": "j1"}, ran=ran)
    assert invariants(verdict) == [("known-process", "j1", 0)]
    assert check(records(*CLEAN), {"k1": "j1"}, ran=ran[:1]).findings == []


def test_a_process_unreported_because_its_node_was_declared_lost_is_accounted_for() -> None:
    # Its agent was killed after the start and came back only after the node timeout: the
    # log ended the attempt as lost with its node, which is what it was.
    events = (*CLEAN[:3], lost("n1"))
    verdict = check(records(*events), {"k1": "j1"}, ran=[("j1", 0, "n1")])
    assert invariants(verdict) == [("ended", "j1", 0)]  # requeued (resumable): it waits
    assert verdict.nodes_lost == 1
    # Lost after the job had moved on, the node accounts for nothing it ran before.
    ended = (*CLEAN[:3], exited("j1", "n1"), lost("n1"))
    verdict = check(records(*ended), {"k1": "j1"}, ran=[("j1", 0, "n1")])
    assert invariants(verdict) == [("known-process", "j1", 0)]


def test_a_plan_replay_cannot_reproduce_is_caught(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    write_history(path, 400, seed=3)
    history = list(read_log(path))
    assert check(history, {}, code_version()).plans_verified > 0

    [first] = [r for r in history if isinstance(r.event, PlanComputed) and r.event.admissions][:1]
    assert isinstance(first.event, PlanComputed)
    forged = msgspec.structs.replace(first.event, admissions=first.event.admissions[1:])
    altered = [msgspec.structs.replace(r, event=forged) if r is first else r for r in history]
    verdict = check(altered, {}, code_version())
    assert [f.invariant for f in verdict.findings if f.invariant == "replay"] == ["replay"]


def test_checking_again_a_directory_without_a_kept_run_says_so_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert check_again(tmp_path / "none") == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"allot: --check {tmp_path / 'none'}: ")
    assert "acknowledged.json" in line


def test_the_processes_a_node_started_are_read_from_its_work_directory(tmp_path: Path) -> None:
    for node_id, job_id, attempt, name in [
        ("node-1", "j1", 0, "pid"),
        ("node-1", "j1", 1, "launching"),  # its agent died before any process existed
        ("node-2", "j2", 0, "exit_code"),  # ran, though its pid was never noted
    ]:
        attempt_dir = tmp_path / "nodes" / node_id / "jobs" / job_id / str(attempt)
        attempt_dir.mkdir(parents=True)
        (attempt_dir / name).write_text("1")
    assert started_on_disk(tmp_path) == [("j1", 0, "node-1"), ("j2", 0, "node-2")]
