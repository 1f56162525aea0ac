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


def test_gang_topology_flavor_and_elastic_fields_from_file_and_flags(tmp_path: Path) -> None:
    (tmp_path / "gang.toml").write_text(
        'account = "a"\nworkers = 4\ngpus = 8\ntopology = "rack"\nflavor = "H100"\n'
        'checkpoint_interval = "10m"\ngrace = "2m"\nresumable = true\ncommand = ["x"]'
    )
    gang = spec_for("--file", str(tmp_path / "gang.toml"))
    assert (gang.workers, gang.gpus, gang.total_gpus, gang.topology) == (4, 8, 32, "rack")
    assert (gang.flavor, gang.resumable) == ("H100", True)
    assert (gang.checkpoint_interval_ns, gang.grace_ns) == (600 * 10**9, 120 * 10**9)
    elastic = spec_for(
        "--account", "a", "--gpus", "2", "--max-gpus", "8", "--topology", "nvlink",
        "--workers", "1", "--grace", "5s", "--", "serve",
    )  # fmt: skip
    assert (elastic.gpus, elastic.max_gpus, elastic.topology, elastic.grace_ns) == (
        2, 8, "nvlink", 5 * 10**9,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("content", "argv", "field"),
    [
        ('account = "a"\ngpus = "two"\ncommand = ["x"]', [], "gpus"),
        ('account = "a"\ngpus = 1\ntier = "urgent"\ncommand = ["x"]', [], "tier"),
        ('account = "a"\ngpus = 1\nmin_runtime = "soon"', [], "min_runtime"),
        ('account = "a"\ngpus = 1\ntopology = "switch"\ncommand = ["x"]', [], "topology"),
        ('account = "a"\ngpus = 1\ngrace = "later"\ncommand = ["x"]', [], "grace"),
        ('account = "a"\ngpus = 1\nworkers = "many"\ncommand = ["x"]', [], "workers"),
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


@pytest.mark.parametrize(
    ("line", "field", "words"),
    [
        ("priority = 5", "priority", "no such field"),
        ("gpu_count = 4", "gpu_count", "did you mean 'gpus'?"),
        ('gpus = "eight"', "gpus", "Expected `int`"),
    ],
)
def test_a_job_file_field_the_spec_lacks_or_mistypes_is_refused_by_name(
    tmp_path: Path, line: str, field: str, words: str
) -> None:
    written = JOB.replace("gpus = 2", line) if line.startswith("gpus") else line + JOB
    (tmp_path / "job.toml").write_text(written)
    with pytest.raises(SpecError) as refused:
        spec_for("--file", str(tmp_path / "job.toml"))
    assert refused.value.problem.field == field
    assert words in refused.value.problem.message
    assert refused.value.problem.value != ""  # the value it got is shown
