"""The command line builds only the part of its parser that the command about to run needs;
each part must be the same as in the whole parser, and anything else gets the whole."""

import argparse

import pytest

from allot.client.cli import build_parser, main


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


@pytest.mark.parametrize(
    "argv", [["status", "j-1", "extra"], ["cancel", "j-1", "--bogus"], ["queue", "x"]]
)
def test_an_error_past_the_command_is_said_as_the_whole_parser_says_it(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Left-over arguments are refused by the top of the parser, whose usage line lists
    every command: the same words whether or not only the command's part was built."""
    with pytest.raises(SystemExit) as whole_exit:
        build_parser().parse_args(argv)
    whole = capsys.readouterr().err
    with pytest.raises(SystemExit) as part_exit:
        main(argv)
    assert part_exit.value.code == whole_exit.value.code == 2
    assert capsys.readouterr().err == whole
    assert "{up,submit," in whole
