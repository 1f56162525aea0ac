"""The node agent reads a job's output a bounded piece at a time, and only the job's own
file: no link, at any step, leads it anywhere else."""

import os
from pathlib import Path

import pytest

from allot.services.node.output import NoOutput, Piece, read_piece


def output_of(work: Path, job_id: str = "j-1", attempt: int = 0) -> Path:
    path = work / "jobs" / job_id / str(attempt) / "output.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def test_a_piece_from_an_offset_and_the_size(tmp_path: Path) -> None:
    output_of(tmp_path).write_bytes(b"hello\n\xffworld\n")
    assert read_piece(tmp_path, "j-1", 0, 0, 3) == Piece(b"hel", 13)
    assert read_piece(tmp_path, "j-1", 0, 6, 100) == Piece(b"\xffworld\n", 13)
    assert read_piece(tmp_path, "j-1", 0, 13, 100) == Piece(b"", 13)
    assert read_piece(tmp_path, "j-1", 0, 10**12, 100) == Piece(b"", 13)


def test_no_output_where_the_attempt_left_none(tmp_path: Path) -> None:
    output_of(tmp_path).write_bytes(b"x")
    for job_id, attempt in [("j-2", 0), ("j-1", 1)]:
        with pytest.raises(NoOutput, match=r"no output\.log here"):
            read_piece(tmp_path, job_id, attempt, 0, 10)


def test_a_link_in_place_of_the_output_is_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("the agent's own")
    output_of(tmp_path).symlink_to(secret)
    with pytest.raises(NoOutput):
        read_piece(tmp_path, "j-1", 0, 0, 100)


def test_a_link_in_place_of_a_directory_is_not_followed(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    output_of(elsewhere).write_text("another job's")
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "j-1").symlink_to(elsewhere / "jobs" / "j-1")
    with pytest.raises(NoOutput):
        read_piece(tmp_path, "j-1", 0, 0, 100)


def test_a_fifo_in_place_of_the_output_holds_nothing_up(tmp_path: Path) -> None:
    os.mkfifo(output_of(tmp_path))
    with pytest.raises(NoOutput, match="no plain file"):
        read_piece(tmp_path, "j-1", 0, 0, 100)
