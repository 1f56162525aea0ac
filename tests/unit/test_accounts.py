import pytest

from allot.core import State, apply
from allot.core.accounts import changes_to_apply, parse_duration, read_tree
from allot.proto.events import AccountDefined, AccountRemoved, AccountSettings, AccountUpdated
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
        ({"ml": {"weight": 0}}, "accounts.ml.weight", "positive whole number"),
        ({"ml": {"quota": {"gpu": -1}}}, "accounts.ml.quota.gpu", "0 or more"),
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
