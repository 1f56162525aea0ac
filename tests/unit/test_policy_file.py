"""Policies as TOML files: every field, checked with field-named errors, and back."""

import tomllib
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from allot.client.policyfile import MAX_FILE_BYTES, load_policy
from allot.core import DEFAULT_POLICY, Policy, policy_hash
from allot.core.fairshare import FairSharePolicy
from allot.core.policies import POLICIES
from allot.core.policytoml import (
    RULES,
    PolicyError,
    policy_toml,
    read_policy,
    read_setting,
    with_settings,
)
from allot.services.planner.app import arguments, policy_from
from allot.sim.cli import chosen

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "policy.toml"
S = 10**9


def leaves(kind: type[msgspec.Struct], prefix: str = "") -> list[str]:
    paths = []
    for field in msgspec.structs.fields(kind):
        if isinstance(field.type, type) and issubclass(field.type, msgspec.Struct):
            paths += leaves(field.type, f"{prefix}{field.name}.")
        else:
            paths.append(prefix + field.name)
    return paths


def problems(text: str) -> dict[str, tuple[str, str]]:
    """field -> (value given, what is accepted), of every problem ``text`` has."""
    with pytest.raises(PolicyError) as caught:
        read_policy(text)
    return {p.field: (p.value, p.message) for p in caught.value.problems}


def test_every_field_of_the_policy_has_a_rule_and_every_rule_a_field() -> None:
    assert sorted(RULES) == sorted(leaves(Policy))


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_every_named_policy_reads_back_from_its_toml_equal_with_the_same_hash(name: str) -> None:
    policy = POLICIES[name]
    text = policy_toml(policy)
    assert read_policy(text) == policy
    assert policy_hash(read_policy(text)) == policy_hash(policy)
    # Every key is written: the file states the whole policy, not what differs from a default.
    written = tomllib.loads(text)
    assert len(written) + len(written["fair_share"]) - 1 == len(RULES)


durations = st.integers(min_value=1, max_value=30 * 86400 * S)


@settings(max_examples=200)
@given(
    half_life=durations,
    window=st.none() | durations,
    aging_step=durations,
    overhead=st.integers(min_value=0, max_value=3600 * S),
    time_slice=st.none() | st.integers(min_value=0, max_value=86400 * S),
    grounds=st.permutations(DEFAULT_POLICY.grounds).flatmap(
        lambda order: st.integers(0, len(order)).map(lambda n: tuple(order[:n]))
    ),
    order=st.sampled_from(["fair-share", "fifo", "tier", "multifactor"]),
    depth=st.integers(min_value=1, max_value=1000),
    flags=st.tuples(st.booleans(), st.booleans(), st.booleans(), st.booleans()),
)
def test_any_valid_policy_reads_back_equal(
    half_life: int,
    window: int | None,
    aging_step: int,
    overhead: int,
    time_slice: int | None,
    grounds: tuple[str, ...],
    order: str,
    depth: int,
    flags: tuple[bool, bool, bool, bool],
) -> None:
    policy = Policy(
        name="p",
        fair_share=FairSharePolicy(half_life_ns=half_life, window_ns=window),
        aging_step_ns=aging_step,
        restart_overhead_ns=overhead,  # parts of a second too
        time_slice_ns=time_slice,
        grounds=grounds,
        order=order,  # type: ignore[arg-type]
        queue_depth=depth,
        backfill=flags[0],
        preemption=flags[1],
        strict=flags[2],
        quotas=flags[3],
    )
    again = read_policy(policy_toml(policy))
    assert again == policy
    assert policy_hash(again) == policy_hash(policy)


def test_the_example_states_every_field_and_is_the_default_policy_by_another_name() -> None:
    text = EXAMPLE.read_text()
    written = tomllib.loads(text)
    assert len(written) + len(written["fair_share"]) - 1 == len(RULES)
    example = load_policy(str(EXAMPLE))
    assert example.name == "example"
    assert msgspec.structs.replace(example, name=DEFAULT_POLICY.name) == DEFAULT_POLICY


def test_a_key_left_out_keeps_the_default_policys_value() -> None:
    mine = read_policy('name = "mine"\nqueue_depth = 80\n[fair_share]\nwindow = "3d"\n')
    assert mine == msgspec.structs.replace(
        DEFAULT_POLICY,
        name="mine",
        queue_depth=80,
        fair_share=FairSharePolicy(window_ns=3 * 86400 * S),
    )


@pytest.mark.parametrize(
    ("written", "ns"),
    [("90", 90 * S), ('"90s"', 90 * S), ('"30m"', 1800 * S), ('"1h30m"', 5400 * S),
     ('"7d"', 7 * 86400 * S), ("0.5", S // 2), ("1.000000001", S + 1), ('"none"', None)],
)  # fmt: skip
def test_durations_are_seconds_or_strings(written: str, ns: int | None) -> None:
    assert read_policy(f'name = "p"\ntime_slice = {written}\n').time_slice_ns == ns


def test_a_value_of_the_wrong_type_is_named_with_what_is_accepted() -> None:
    found = problems('name = "p"\nqueue_depth = "fifty"\nbackfill = 1\nfair_share = 3\n')
    assert found["queue_depth"] == ("fifty", "a whole number from 1 to 1000000")
    assert found["backfill"] == ("1", "true or false")
    assert found["fair_share"] == ("3", "a table of half_life, window, basis")


def test_an_unknown_key_is_named_with_the_known_ones() -> None:
    found = problems('name = "p"\nqueue_dpth = 3\n[fair_share]\nhalflife = "7d"\n')
    value, message = found["queue_dpth"]
    assert value == "3"
    assert message.startswith("no such key; did you mean 'queue_depth'? Known keys: name, ")
    assert "aging_step, aging_max_ranks, backfill" in message
    assert found["fair_share.halflife"][1] == (
        "no such key; did you mean 'half_life'? Known keys: half_life, window, basis"
    )


def test_values_out_of_range_are_refused() -> None:
    found = problems(
        'name = "p"\nqueue_depth = 0\naging_max_ranks = -1\nmax_age = 0\n'
        'restart_overhead = 1e999999999\norder = "lottery"\ngrounds = ["TIER", "TIER"]\n'
        'time_slice = 0.0000000001\n[fair_share]\nhalf_life = "0s"\nwindow = "3651d"\n'
    )
    assert found["queue_depth"] == ("0", "a whole number from 1 to 1000000")
    assert found["aging_max_ranks"] == ("-1", "a whole number from 0 to 1000000")
    assert "more than 0s, at most 3650d" in found["max_age"][1]
    assert "0s or more, at most 3650d" in found["restart_overhead"][1]
    assert found["order"] == ("lottery", 'one of "fair-share", "fifo", "tier", "multifactor"')
    assert problems('name = "p"\n[fair_share]\nbasis = "need"\n')["fair_share.basis"] == (
        "need",
        'one of "share", "owed"',
    )
    assert found["grounds"][1].startswith('a list of distinct names from "TIER", ')
    assert found["time_slice"][0] == "1E-10"  # finer than a nanosecond
    assert "more than 0s" in found["fair_share.half_life"][1]
    assert found["fair_share.window"][0] == "3651d"
    assert len(found) == 9  # every problem at once


def test_a_bad_duration_says_how_to_write_one() -> None:
    value, message = problems('name = "p"\naging_step = "1 hour"\n')["aging_step"]
    assert value == "1 hour"
    assert message.startswith('a duration: seconds (90, 0.5) or d, h, m and s such as "90s"')


def test_text_that_is_not_toml_is_refused_whole() -> None:
    with pytest.raises(PolicyError, match=r"^not TOML: .*line 1"):
        read_policy("name = \n")
    with pytest.raises(PolicyError, match=r"^not TOML: nested too deep$"):
        read_policy('name = "p"\ngrounds = ' + "[" * 5000 + "]" * 5000)
    found = problems('name = "p"\ngrounds = [[[[[[["x"]]]]]], {a = 1}]\n')
    assert found["grounds"][0] == "[[[[...]]], {a = 1}]"  # shown shortened


def test_the_name_is_required_and_plain() -> None:
    assert problems("queue_depth = 10\n") == {
        "name": ("", "required; plans record the policy by its name")
    }
    assert problems('name = "a b"\n')["name"][1] == "1 to 64 letters, digits, '.', '_' or '-'"


def test_a_policy_is_chosen_by_name_or_by_file(tmp_path: Path) -> None:
    assert load_policy("slurm") is POLICIES["slurm"]
    (tmp_path / "mine.toml").write_text(policy_toml(POLICIES["kueue"]))
    assert load_policy(str(tmp_path / "mine.toml")) == POLICIES["kueue"]
    with pytest.raises(PolicyError) as caught:
        load_policy("slurmm")
    assert str(caught.value) == (
        "slurmm: not a named policy (allot, fifo, kueue, priority, slurm) nor a readable file: "
        "No such file or directory"
    )
    (tmp_path / "bad.toml").write_text('name = "p"\nfill_depth = -1\n')
    with pytest.raises(PolicyError, match=r"bad.toml: fill_depth='-1': a whole number from 0"):
        load_policy(str(tmp_path / "bad.toml"))
    (tmp_path / "binary").write_bytes(b"\xff\xfe")
    with pytest.raises(PolicyError, match="binary: not TOML: not UTF-8"):
        load_policy(str(tmp_path / "binary"))
    (tmp_path / "huge").write_text("#" * (MAX_FILE_BYTES + 1))
    with pytest.raises(PolicyError, match="huge: larger than"):
        load_policy(str(tmp_path / "huge"))


def test_one_setting_from_a_command_line_is_checked_as_a_file_would_be() -> None:
    assert read_setting("fair_share.half_life", "1d") == 86400 * S
    assert read_setting("fair_share.window", "none") is None
    assert read_setting("restart_overhead", "0.5") == S // 2
    assert read_setting("aging_max_ranks", "7") == 7
    with pytest.raises(PolicyError, match=r"^aging_max_ranks='-1': a whole number from 0"):
        read_setting("aging_max_ranks", "-1")
    with pytest.raises(PolicyError, match=r"^aging_step='soon': a duration"):
        read_setting("aging_step", "soon")
    changed = with_settings(POLICIES["fifo"], {"fair_share.half_life": S, "order": "tier"})
    assert changed == msgspec.structs.replace(
        POLICIES["fifo"], fair_share=FairSharePolicy(half_life_ns=S), order="tier"
    )


def test_the_planner_runs_the_default_policy_unless_told_otherwise() -> None:
    assert policy_from(arguments().parse_args([])) == DEFAULT_POLICY
    assert policy_from(arguments().parse_args(["--policy", "fifo"])) == POLICIES["fifo"]
    assert policy_from(arguments().parse_args(["--policy", str(EXAMPLE)])).name == "example"


def test_the_planners_flags_win_over_the_chosen_policy() -> None:
    args = arguments().parse_args(
        ["--policy", "slurm", "--half-life", "1d", "--usage-window", "3d", "--aging-step", "2h",
         "--aging-max", "2", "--no-backfill", "--order", "tier"]
    )  # fmt: skip
    assert policy_from(args) == msgspec.structs.replace(
        POLICIES["slurm"],
        fair_share=FairSharePolicy(half_life_ns=86400 * S, window_ns=3 * 86400 * S),
        aging_step_ns=7200 * S,
        aging_max_ranks=2,
        backfill=False,
        order="tier",
    )
    # A flag can also turn back on what the policy turned off, or unset a window.
    assert policy_from(arguments().parse_args(["--policy", "fifo", "--backfill"])).backfill
    windowed = msgspec.structs.replace(DEFAULT_POLICY, fair_share=FairSharePolicy(window_ns=S))
    args = arguments().parse_args(["--usage-window", "none"])
    assert with_settings(windowed, {"fair_share.window": args.usage_window}) == DEFAULT_POLICY


@pytest.mark.parametrize(
    ("argv", "said"),
    [(["--aging-max", "-1"], "argument --aging-max: aging_max_ranks='-1': a whole number"),
     (["--half-life", "0s"], "argument --half-life: fair_share.half_life='0s': a duration"),
     (["--policy", "nope"], "argument --policy: nope: not a named policy")],
)  # fmt: skip
def test_a_bad_planner_flag_is_a_usage_error(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        arguments().parse_args(argv)
    assert exited.value.code == 2
    assert said in capsys.readouterr().err


def test_the_simulator_names_each_policy_and_tells_apart_two_of_one_name(tmp_path: Path) -> None:
    (tmp_path / "other.toml").write_text('name = "allot"\nqueue_depth = 60\n')
    (tmp_path / "same.toml").write_text(policy_toml(POLICIES["slurm"]))
    runs = chosen(["allot", str(tmp_path / "other.toml"), "slurm", str(tmp_path / "same.toml")])
    other = read_policy((tmp_path / "other.toml").read_text())
    assert [name for name, _ in runs] == [
        f"allot@{policy_hash(DEFAULT_POLICY)[:8]}",
        f"allot@{policy_hash(other)[:8]}",
        "slurm",
        "slurm",  # the same policy twice: one name
    ]
    assert [policy for _, policy in runs] == [
        DEFAULT_POLICY, other, POLICIES["slurm"], POLICIES["slurm"]
    ]  # fmt: skip
