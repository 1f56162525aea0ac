"""The command line builds only the part of its parser that the command about to run needs;
each part must be the same as in the whole parser, and anything else gets the whole."""

import argparse

import pytest

from allot.client.cli import build_parser


def commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    [action] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


WHOLE = commands(build_parser())


@pytest.mark.parametrize("name", sorted(WHOLE))
def test_the_part_built_for_a_command_is_that_command_as_in_the_whole(name: str) -> None:
    part = commands(build_parser(name))
    assert list(part) == [name]
    assert part[name].format_help() == WHOLE[name].format_help()
    assert part[name]._defaults == WHOLE[name]._defaults


@pytest.mark.parametrize("first", [None, "--help", "-h", "bogus", "--json"])
def test_no_command_or_an_unknown_one_gets_the_whole_parser(first: str | None) -> None:
    assert list(commands(build_parser(first))) == list(WHOLE)
    assert len(WHOLE) > 10
