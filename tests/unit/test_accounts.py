import pytest

from allot.core import State, apply
from allot.core.accounts import (
    MAX_CHANGES,
    changes_to_apply,
    parse_duration,
    read_tree,
)
from allot.core.durations import format_duration
from allot.proto.commands import FieldError
from allot.proto.events import (
    AccountDefined,
    AccountRemoved,
    AccountsApplied,
    AccountSettings,
    AccountUpdated,
)
from tests import builders as b
from tests.builders import fold

TREE = {
    "ml": {"weight": 2},
    "ml/vision": {"weight": 1, "quota": {"gpu": 8}, "max_wait": "4h"},
    "ml/nlp": {"weight": 3, "borrowing_limit": {"gpu:H100": 4}, "lending_limit": {"cpu": 0}},
    "ops": {},
}


def test_a_declared_tree_is_read_into_settings() -> None:
    tree, errors = read_tree(TREE)
    assert errors == []
    assert tree["ml/vision"] == AccountSettings(
        weight=1, quota={"gpu": 8}, max_wait_ns=4 * 3600 * 10**9
    )
    assert tree["ops"] == AccountSettings()


@pytest.mark.parametrize(
    ("raw", "field", "words"),
    [
        ({"ml": {"weight": "two"}}, "accounts.ml.weight", "Expected `int`"),
        ({"ml": {"weight": 0}}, "accounts.ml.weight", "from 1 to 1000000"),
        ({"ml": {"weight": 10**30}}, "accounts.ml.weight", "from 1 to 1000000"),
        ({"ml": {"quota": {"gpu": -1}}}, "accounts.ml.quota.gpu", "from 0 to"),
        ({"ml": {"quota": {"gpu": 2**64}}}, "accounts.ml.quota.gpu", "from 0 to"),
        ({"ml": {"lending_limit": {"cpu": 2**41}}}, "accounts.ml.lending_limit.cpu", "from 0"),
        ({"ml": {"quota": {f"gpu:m{i}": 1 for i in range(65)}}}, "accounts.ml.quota", "64"),
        ({"ml": {"quota": {"gpu:" + "x" * 65: 1}}}, "accounts.ml.quota.gpu:" + "x" * 65, "64"),
        ({"ml": {"max_wait": "366d"}}, "accounts.ml.max_wait", "at most 365d"),
        ({"ml": {"max_wait": "0s"}}, "accounts.ml.max_wait", "positive"),
        ({"ml": {"max_wait": "9" * 5000 + "d"}}, "accounts.ml.max_wait", "too long"),
        ({"ml": {"quota": {"tpu": 1}}}, "accounts.ml.quota.tpu", "resources are"),
        ({"ml": {"max_wait": "soon"}}, "accounts.ml.max_wait", "not a duration"),
        ({"ml": {"colour": "red"}}, "accounts.ml.colour", "unknown field"),
        ({"ml/vision": {}}, "accounts.ml/vision", "parent 'ml' is not declared"),
        ({"ML": {}}, "accounts.ML", "lower-case segments"),
    ],
)
def test_every_problem_names_the_account_and_the_field(
    raw: dict[str, object], field: str, words: str
) -> None:
    _, errors = read_tree(raw)  # type: ignore[arg-type]
    assert [e.field for e in errors] == [field]
    assert words.lower() in errors[0].message.lower()


def test_durations() -> None:
    assert parse_duration("90s") == 90 * 10**9
    assert parse_duration("7d") == 7 * 86400 * 10**9
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration("1.5h")


S = 10**9


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1h30m", 5400),
        ("2d12h", 216_000),
        ("90s", 90),
        ("1h30m15s", 5415),
        ("0s", 0),
        (" 45m ", 2700),
    ],
)
def test_compound_durations(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds * S


@pytest.mark.parametrize("text", ["", "h", "1.5h", "1h1h", "30m1h", "1x", "-5m", "1 h", "1h 30m"])
def test_garbage_is_no_duration_and_the_message_says_what_is(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration") as refused:
        parse_duration(text)
    assert "1h30m" in str(refused.value)  # what is accepted, by example


@pytest.mark.parametrize(
    ("ns", "text"),
    [
        (0, "0s"),
        (90 * S, "1m30s"),
        (9 * 3600 * S, "9h"),
        (5415 * S, "1h30m15s"),
        (216_000 * S, "2d12h"),
        (1_500_000_000, "1.5s"),
        (250_000_000, "0.25s"),
        (7, "7ns"),
        (-30 * S, "-30s"),
    ],
)
def test_durations_are_written_as_they_are_read(ns: int, text: str) -> None:
    assert format_duration(ns) == text


def test_a_written_duration_reads_back() -> None:
    for ns in (S, 59 * S, 3601 * S, 86400 * S + 1 * S, 400 * 86400 * S):
        assert parse_duration(format_duration(ns)) == ns


def test_a_duration_shown_in_short_keeps_its_largest_units() -> None:
    assert format_duration(4983 * S, units=2) == "1h23m"
    assert format_duration(2 * 86400 * S + 7 * S, units=2) == "2d"
    assert format_duration(42 * S, units=2) == "42s"


def test_applying_defines_parents_first_and_removes_children_first() -> None:
    tree, _ = read_tree(TREE)
    changes, errors = changes_to_apply(State(), tree)
    assert errors == []
    assert [(c.kind, c.path) for c in changes] == [
        ("define", "ml"),
        ("define", "ops"),
        ("define", "ml/nlp"),
        ("define", "ml/vision"),
    ]
    state = fold(
        *(AccountDefined(meta=b.meta(), path=c.path, settings=tree[c.path]) for c in changes)
    )
    smaller, _ = read_tree({"ml": {"weight": 5}, "ops": {}})
    changes, errors = changes_to_apply(state, smaller)
    assert [(c.kind, c.path) for c in changes] == [
        ("update", "ml"),
        ("remove", "ml/vision"),
        ("remove", "ml/nlp"),
    ]
    assert changes_to_apply(state, tree) == ([], [])  # applying the same tree again: nothing


def test_an_account_with_live_jobs_cannot_be_removed() -> None:
    state = fold(
        AccountDefined(meta=b.meta(), path="lab", settings=AccountSettings()),
        AccountDefined(meta=b.meta(), path="lab/team", settings=AccountSettings()),
        b.submitted("j1"),  # account lab/team
    )
    _, errors = changes_to_apply(state, {})
    assert [e.field for e in errors] == ["accounts.lab/team", "accounts.lab"]
    assert "lab/team" in errors[1].message


def test_the_fold_keeps_the_tree_consistent() -> None:
    state = fold(
        AccountDefined(meta=b.meta(), path="a/b", settings=AccountSettings()),  # no parent yet
        AccountDefined(meta=b.meta(), path="a", settings=AccountSettings()),
        AccountDefined(meta=b.meta(), path="a/b", settings=AccountSettings()),
        AccountUpdated(meta=b.meta(), path="a", settings=AccountSettings(weight=4)),
        AccountRemoved(meta=b.meta(), path="a"),  # still has a child
    )
    assert sorted(state.accounts) == ["a", "a/b"]
    assert state.accounts["a"].weight == 4
    assert [i.seq for i in state.ignored] == [1, 5]
    apply(state, 6, AccountRemoved(meta=b.meta(), path="a/b"))
    assert sorted(state.accounts) == ["a"]


def test_an_apply_changes_the_whole_tree_at_once_or_not_at_all() -> None:
    state = fold(
        AccountDefined(meta=b.meta(), path="a", settings=AccountSettings()),  # an older log
        AccountDefined(meta=b.meta(), path="a/old", settings=AccountSettings()),
        AccountsApplied(
            meta=b.meta(),
            defined={"a/b": AccountSettings(), "a/b/c": AccountSettings(weight=2)},
            updated={"a": AccountSettings(weight=3)},
            removed=["a/old"],
        ),
    )
    assert state.ignored == []
    assert state.accounts == {
        "a": AccountSettings(weight=3),
        "a/b": AccountSettings(),
        "a/b/c": AccountSettings(weight=2),
    }
    version = state.fair_share_version
    for seq, broken in enumerate(
        [
            AccountsApplied(meta=b.meta(), defined={"x/y": AccountSettings()}),  # no parent
            AccountsApplied(meta=b.meta(), removed=["a/b"]),  # a/b/c would lose its parent
            AccountsApplied(meta=b.meta(), updated={"zz": AccountSettings()}),  # unknown
            AccountsApplied(meta=b.meta(), defined={"a": AccountSettings()}),  # defined already
            AccountsApplied(meta=b.meta(), defined={"Bad Path": AccountSettings()}),
            AccountsApplied(
                meta=b.meta(),
                defined={"d": AccountSettings()},  # fine on its own...
                updated={"a": AccountSettings(weight=0)},  # ...but not with this
            ),
        ],
        start=4,
    ):
        apply(state, seq, broken)
        assert state.ignored[-1].seq == seq
    assert sorted(state.accounts) == ["a", "a/b", "a/b/c"]
    assert state.accounts["a"].weight == 3
    assert state.fair_share_version == version


def test_one_apply_changes_at_most_so_many_accounts() -> None:
    tree = {"lab": AccountSettings()} | {f"lab/{i}": AccountSettings() for i in range(MAX_CHANGES)}
    _, errors = changes_to_apply(State(), tree)
    assert [(e.field, e.value) for e in errors] == [("accounts", f"{MAX_CHANGES + 1} changes")]
    assert f"at most {MAX_CHANGES}" in errors[0].message
    del tree["lab/0"]
    assert changes_to_apply(State(), tree)[1] == []


def test_removing_a_tree_of_thousands_of_busy_accounts_is_refused_in_short_words() -> None:
    teams = [f"lab/t{i:05d}" for i in range(10_000)]
    state = fold(
        AccountsApplied(meta=b.meta(), defined={p: AccountSettings() for p in ["lab", *teams]}),
        *(b.submitted(f"j{i}", account=team) for i, team in enumerate(teams)),
    )
    _, errors = changes_to_apply(state, {})
    assert len(errors) == len(teams) + 1
    assert errors[0] == FieldError(
        field="accounts.lab/t09999",
        value="lab/t09999",
        message="cannot remove it: pending or running jobs in lab/t09999",
    )
    assert errors[-1].field == "accounts.lab"
    assert errors[-1].message == (
        "cannot remove it: pending or running jobs in lab/t00000, lab/t00001, lab/t00002, "
        "lab/t00003, lab/t00004 and 9995 more accounts"
    )


def test_a_huge_bad_value_is_named_without_being_echoed_whole() -> None:
    tree, errors = read_tree({"lab": {"preemption": {"within_account": "x" * 100_000}}})
    assert tree == {}
    [error] = errors
    assert error.field == "accounts.lab.preemption.within_account"
    assert len(error.value) <= 200
    assert len(error.message) <= 400
    assert error.message.startswith("Invalid enum value 'xxx")
    assert error.message.endswith("one of 'never', 'lower-tier', 'any'")
