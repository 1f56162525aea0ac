"""``allot bench stack``'s counts are whole numbers of at least 1: 0 or less is refused by
the parser, naming the option and the value, instead of failing later with a traceback."""

import pytest

from allot.client.cli import build_parser


@pytest.mark.parametrize("option", ["--jobs", "--cli-runs", "--burst", "--concurrency"])
@pytest.mark.parametrize("value", ["0", "-3", "many"])
def test_a_count_below_one_is_refused_naming_it(
    option: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["bench", "stack", f"{option}={value}"])
    assert exit_.value.code == 2
    error = capsys.readouterr().err
    assert option in error
    assert repr(value) in error
    assert "a whole number of at least 1" in error


def test_counts_of_one_or_more_are_taken() -> None:
    args = build_parser().parse_args(["bench", "stack", "--jobs", "1", "--cli-runs", "3"])
    assert (args.jobs, args.cli_runs) == (1, 3)
