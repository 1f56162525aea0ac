"""The chaos schedule: every kind in turn first, then kinds at random, all from the seed."""

import pytest

from allot.client.chaos import BOTH_PLANNERS, KINDS, Kill, kill_schedule
from allot.client.cli import main

NODES = ["node-1", "node-2"]
PLANNERS = ["planner", "planner-2"]


def test_every_kind_is_killed_once_in_turn_before_any_at_random() -> None:
    kills = kill_schedule(1, 30, NODES, PLANNERS)
    assert [k.kind for k in kills[: len(KINDS)]] == list(KINDS)
    assert len(kills) == 30
    assert {k.kind for k in kills[len(KINDS) :]} <= set(KINDS)


def test_targets_name_the_processes_of_each_kind() -> None:
    kills = kill_schedule(1, 200, NODES, PLANNERS)
    for kill in kills:
        if kill.kind == "node":
            assert kill.targets[0] in NODES
            assert len(kill.targets) == 1
        elif kill.kind == "planner":
            assert kill.targets[0] in PLANNERS
            assert len(kill.targets) == 1
        elif kill.kind == BOTH_PLANNERS:
            assert kill.targets == tuple(PLANNERS)
        else:
            assert kill.targets == (kill.kind,)
    assert {k.targets for k in kills if k.kind == "node"} == {("node-1",), ("node-2",)}


def test_the_same_seed_gives_the_same_schedule_and_another_seed_another() -> None:
    first = kill_schedule(5, 40, NODES, PLANNERS)
    assert first == kill_schedule(5, 40, NODES, PLANNERS)
    assert first != kill_schedule(6, 40, NODES, PLANNERS)
    assert all(isinstance(k, Kill) for k in first)


@pytest.mark.parametrize(
    ("option", "value"),
    [("--seconds", "0"), ("--kill-every", "-1"), ("--submit-every", "0"), ("--settle", "-5")],
)
def test_a_run_that_could_not_work_is_refused_in_one_line_naming_the_option_and_value(
    option: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", "chaos", option, value]) == 2
    out = capsys.readouterr()
    [line] = (out.out + out.err).splitlines()
    assert line == f"allot: {option}={value}: give a number of seconds above 0"
