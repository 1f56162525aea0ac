"""The examples keep the workload contract: stopped with SIGTERM, then resumed, they end
with exactly what an uninterrupted run gives."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from allot import workload

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run(script: str, job_dir: Path, attempt: int, env: dict[str, str]) -> subprocess.Popen[str]:
    allot = {
        "ALLOT_JOB_ID": "j-example",
        "ALLOT_ATTEMPT": str(attempt),
        "ALLOT_CHECKPOINT_DIR": str(job_dir / "checkpoints"),
        "CUDA_VISIBLE_DEVICES": "0",
    }
    return subprocess.Popen(
        [sys.executable, str(EXAMPLES / script)],
        env={**os.environ, **allot, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def interrupted(script: str, job_dir: Path, env: dict[str, str]) -> str:
    """Stop the job with SIGTERM once it has a checkpoint, then run it again to the end."""
    first = run(script, job_dir, 0, env)
    deadline = time.monotonic() + 30
    while not workload.checkpoints(job_dir / "checkpoints"):
        assert time.monotonic() < deadline, "no checkpoint"
        time.sleep(0.02)
    time.sleep(0.05)
    first.send_signal(signal.SIGTERM)
    out, err = first.communicate(timeout=30)
    assert first.returncode == 0, err
    assert "stopping" in out
    second = run(script, job_dir, 1, env)
    out, err = second.communicate(timeout=60)
    assert second.returncode == 0, err
    assert "resumed" in out
    return out


def test_the_training_example_resumes_to_the_uninterrupted_result(tmp_path: Path) -> None:
    env = {"TRAIN_STEPS": "60", "STEP_SECONDS": "0.01", "CHECKPOINT_EVERY": "5"}
    whole = run("train_numpy.py", tmp_path / "a", 0, {**env, "RESULT": str(tmp_path / "a.json")})
    assert whole.wait(timeout=60) == 0
    interrupted("train_numpy.py", tmp_path / "b", {**env, "RESULT": str(tmp_path / "b.json")})
    assert (tmp_path / "b.json").read_text() == (tmp_path / "a.json").read_text()


def test_the_inference_example_resumes_to_the_uninterrupted_output(tmp_path: Path) -> None:
    env = {"PROMPTS": "60", "STEP_SECONDS": "0.01", "CHECKPOINT_EVERY": "7"}
    whole = run("batch_inference.py", tmp_path / "a", 0, {**env, "OUTPUT": str(tmp_path / "a.txt")})
    assert whole.wait(timeout=60) == 0
    interrupted("batch_inference.py", tmp_path / "b", {**env, "OUTPUT": str(tmp_path / "b.txt")})
    answers = (tmp_path / "b.txt").read_text()
    assert answers == (tmp_path / "a.txt").read_text()
    assert len(answers.splitlines()) == 60
