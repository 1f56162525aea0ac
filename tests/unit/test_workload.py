from pathlib import Path

import pytest

from allot import workload


def test_the_job_reads_what_the_agent_set(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ALLOT_JOB_ID", "j-1")
    monkeypatch.setenv("ALLOT_ATTEMPT", "2")
    monkeypatch.setenv("ALLOT_CHECKPOINT_DIR", str(tmp_path))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")
    assert workload.job_id() == "j-1"
    assert workload.attempt() == 2
    assert workload.checkpoint_dir() == tmp_path
    assert workload.visible_gpus() == [4, 5]


def test_outside_allot_the_error_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ALLOT_JOB_ID", raising=False)
    with pytest.raises(workload.NotUnderAllot, match="ALLOT_JOB_ID is not set"):
        workload.job_id()
