from pathlib import Path

import pytest

from allot.client.cli import build_parser
from allot.client.jobfile import SpecError, spec_from

JOB = """
account = "lab/vision/alice"
gpus = 2
tier = "interactive"
min_runtime = "30m"
max_runtime = "4h"
command = ["python", "train.py"]
[env]
MODE = "offline"
"""


def spec_for(*argv: str):  # type: ignore[no-untyped-def]
    return spec_from(build_parser().parse_args(["submit", *argv]))


def test_a_job_file_gives_every_field(tmp_path: Path) -> None:
    (tmp_path / "job.toml").write_text(JOB)
    spec = spec_for("--file", str(tmp_path / "job.toml"))
    assert (spec.account, spec.gpus, spec.tier) == ("lab/vision/alice", 2, "interactive")
    assert (spec.min_runtime_ns, spec.max_runtime_ns) == (1800 * 10**9, 4 * 3600 * 10**9)
    assert spec.command == ["python", "train.py"]
    assert spec.env == {"MODE": "offline"}


def test_flags_win_over_the_file(tmp_path: Path) -> None:
    (tmp_path / "job.toml").write_text(JOB)
    spec = spec_for(
        "--file", str(tmp_path / "job.toml"), "--gpus", "4", "--tier", "best-effort",
        "--env", "SEED=1", "--", "python", "eval.py",
    )  # fmt: skip
    assert (spec.gpus, spec.tier, spec.command) == (4, "best-effort", ["python", "eval.py"])
    assert spec.env == {"MODE": "offline", "SEED": "1"}


@pytest.mark.parametrize(
    ("content", "argv", "field"),
    [
        ('account = "a"\ngpus = "two"\ncommand = ["x"]', [], "gpus"),
        ('account = "a"\ngpus = 1\ntier = "urgent"\ncommand = ["x"]', [], "tier"),
        ('account = "a"\ngpus = 1\nmin_runtime = "soon"', [], "min_runtime"),
        ('gpus = 1\ncommand = ["x"]', [], "account"),
        ("gpus = [", [], "file"),
    ],
)
def test_a_bad_job_file_names_the_field(
    tmp_path: Path, content: str, argv: list[str], field: str
) -> None:
    (tmp_path / "job.toml").write_text(content)
    with pytest.raises(SpecError) as error:
        spec_for("--file", str(tmp_path / "job.toml"), *argv)
    assert error.value.problem.field == field
