import os
import subprocess
import sys
from pathlib import Path

import pytest

from allot import workload


def test_the_job_reads_what_the_agent_set(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ALLOT_JOB_ID", "j-1")
    monkeypatch.setenv("ALLOT_ATTEMPT", "2")
    monkeypatch.setenv("ALLOT_CHECKPOINT_DIR", str(tmp_path))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-a,MIG-b")
    monkeypatch.setenv("ALLOT_GPU_INDICES", "4,9")
    monkeypatch.setenv("ALLOT_GPU_UUIDS", "GPU-a,MIG-b")
    assert workload.job_id() == "j-1"
    assert workload.attempt() == 2
    assert workload.checkpoint_dir() == tmp_path
    assert workload.visible_gpus() == [4, 9]
    assert workload.gpu_uuids() == ["GPU-a", "MIG-b"]


def test_outside_allot_the_error_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ALLOT_JOB_ID", raising=False)
    with pytest.raises(workload.NotUnderAllot, match="ALLOT_JOB_ID is not set"):
        workload.job_id()


def test_checkpoints_are_numbered_kept_two_deep_and_resumed_from_the_latest(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ALLOT_CHECKPOINT_DIR", str(tmp_path / "ckpt"))
    assert workload.resume() is None
    for step in range(1, 4):
        saved = workload.save({"step": step})
        assert saved.name == f"checkpoint-{step:08d}.pkl"
    assert [n for n, _ in workload.checkpoints(tmp_path / "ckpt")] == [2, 3]
    assert workload.resume() == {"step": 3}
    assert not list((tmp_path / "ckpt").glob(".*.tmp"))  # nothing half-written is left


def test_sigterm_only_asks_the_job_to_stop() -> None:
    code = (
        "import os, signal\n"
        "from allot import workload\n"
        "assert not workload.should_stop()\n"
        "os.kill(os.getpid(), signal.SIGTERM)\n"
        "assert workload.should_stop()\n"
        "print('still here')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "ALLOT_JOB_ID": "j-1"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "still here\n"
