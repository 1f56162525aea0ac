"""The account tree: validating a declared tree and working out what applying it changes.

An account is named by its path (``org/program/project/team``); its parent is the path
without the last segment, so a cycle cannot be written down, and a missing parent is an
error. Applying a file makes the tree equal to it: new paths are defined, changed ones
updated, missing ones removed (only if nothing of theirs is pending or running).
"""

import functools
import re
import typing
from collections.abc import Iterator, Mapping
from typing import Any, Final, Literal

import msgspec

from allot.core.durations import format_duration
from allot.core.durations import parse_duration as parse_duration  # where callers know it
from allot.core.model import State
from allot.core.validate import ACCOUNT_PATTERN
from allot.proto.commands import FieldError
from allot.proto.events import AccountPreemption, AccountSettings
from allot.proto.subjects import MAX_PRINCIPAL, is_principal

RESOURCE = re.compile(r"^(gpu(:[A-Za-z0-9_.-]{1,64})?|cpu|memory_mib)$")
MAX_WEIGHT: Final = 1_000_000  # a relative share: a million to one is far beyond any tree
MAX_AMOUNT: Final = 1 << 40  # GPUs, CPUs or MiB of any cluster (2^40 MiB is an exbibyte)
MAX_RESOURCES: Final = 64  # per table of amounts
MAX_WAIT_NS: Final = 365 * 86400 * 10**9  # a year: a longer wait target is a typo
# One apply is one event (docs/adr/0013). A change is written there in ~30 bytes with default
# settings, ~80 with a weight, a quota and a wait: this many stay below the event limit. The
# ledger also measures the event, for longer paths and more settings than that.
MAX_CHANGES: Final = 10_000
MAX_MEMBERS: Final = 1_000  # names in an account's members, and in its admins
_UNKNOWN_FIELD = re.compile(r"unknown field `([^`]*)`")


def _shortened(message: str, most: int = 400) -> str:
    """A message that may quote the value it refuses (msgspec's do), cut to a length a reply
    can carry for every field of a big tree."""
    return message if len(message) <= most else message[: most - 1] + "…"


def _choices(kind: object) -> list[str]:
    """The words a field typed as a ``Literal`` (or one or None) takes."""
    if typing.get_origin(kind) is Literal:
        return [str(word) for word in typing.get_args(kind)]
    return [word for arg in typing.get_args(kind) for word in _choices(arg)]


# Field -> the words it takes, for errors that name them: msgspec says only that a word is
# not one of them.
_CHOICES: Final = {
    f"preemption.{field.name}": ", ".join(repr(w) for w in _choices(field.type))
    for field in msgspec.structs.fields(AccountPreemption)
}


class AccountChange(msgspec.Struct, frozen=True, kw_only=True):
    kind: Literal["define", "update", "remove"]
    path: str
    settings: AccountSettings | None = None


def parent_of(path: str) -> str | None:
    return path.rsplit("/", 1)[0] if "/" in path else None


@functools.lru_cache(maxsize=4096)
def ancestry(path: str) -> tuple[str, ...]:
    """The path and every ancestor, nearest first: ``a/b/c`` -> ``a/b/c, a/b, a``.
    Remembered: a planning cycle asks it of the same few accounts thousands of times."""
    parts = path.split("/")
    return tuple("/".join(parts[:n]) for n in range(len(parts), 0, -1))


def read_tree(raw: Mapping[str, Any]) -> tuple[dict[str, AccountSettings], list[FieldError]]:
    """A declared tree (path -> settings as written in a file) as settings, or every
    problem with it, each naming the account and the field."""
    tree: dict[str, AccountSettings] = {}
    errors: list[FieldError] = []

    def bad(path: str, field: str, value: object, message: str) -> None:
        errors.append(
            FieldError(
                field=f"accounts.{path[:200]}.{field}".rstrip("."),
                value=str(value)[:200],  # enough to recognise it; a reply need not echo more
                message=_shortened(message),
            )
        )

    for path in sorted(raw):
        entry = raw[path]
        if not ACCOUNT_PATTERN.fullmatch(path):
            bad(path, "", path, "account paths are lower-case segments such as 'ml/vision'")
            continue
        if not isinstance(entry, Mapping):
            bad(path, "", entry, "expected a table of settings (weight, quota, ...)")
            continue
        fields = dict(entry)
        if "max_wait" in fields:
            try:
                fields["max_wait_ns"] = parse_duration(str(fields.pop("max_wait")))
            except ValueError as error:
                bad(path, "max_wait", entry["max_wait"], str(error))
                continue
        try:
            settings = msgspec.convert(fields, AccountSettings)
        except msgspec.ValidationError as error:
            field, message = _where(error)
            message = _shortened(message, 200)  # it may quote the value, however long
            if field in _CHOICES:
                message = f"{message}: one of {_CHOICES[field]}"
            bad(path, field, _lookup(entry, field), message)
            continue
        problems = list(settings_problems(settings))
        for field, value, message in problems:
            bad(path, field, value, message)
        if not problems:
            tree[path] = settings
    for path in sorted(raw):
        parent = parent_of(path)
        if parent is not None and parent not in raw:
            bad(path, "", path, f"its parent {parent!r} is not declared")
    return tree, errors


def settings_problems(settings: AccountSettings) -> Iterator[tuple[str, object, str]]:
    """What is wrong with an account's settings, as (field, value, what is accepted)."""
    if not 1 <= settings.weight <= MAX_WEIGHT:
        yield "weight", settings.weight, f"a whole number from 1 to {MAX_WEIGHT} (a relative share)"
    for name in ("quota", "borrowing_limit", "lending_limit"):
        amounts: dict[str, int] = getattr(settings, name)
        if len(amounts) > MAX_RESOURCES:
            yield name, f"{len(amounts)} resources", f"at most {MAX_RESOURCES}"
            continue
        for resource, amount in sorted(amounts.items()):
            if not RESOURCE.fullmatch(resource):
                yield (
                    f"{name}.{resource}",
                    resource[:100],
                    "resources are gpu, gpu:<model> (1 to 64 characters), cpu, memory_mib",
                )
            elif not 0 <= amount <= MAX_AMOUNT:
                yield f"{name}.{resource}", amount, f"a whole number from 0 to {MAX_AMOUNT}"
    for name in ("members", "admins"):
        principals: list[str] = getattr(settings, name)
        if len(principals) > MAX_MEMBERS:
            yield name, f"{len(principals)} names", f"at most {MAX_MEMBERS}"
            continue
        for principal in principals:
            if not is_principal(principal):
                yield (
                    name,
                    principal[:100],
                    f"identity names: 1 to {MAX_PRINCIPAL} letters, digits, '_' or '-'",
                )
    if settings.max_wait_ns is not None and not 0 < settings.max_wait_ns <= MAX_WAIT_NS:
        yield (
            "max_wait",
            format_duration(settings.max_wait_ns),
            "a positive duration of at most 365d",
        )


def changes_to_apply(
    state: State, tree: Mapping[str, AccountSettings]
) -> tuple[list[AccountChange], list[FieldError]]:
    """What makes the current tree equal to ``tree``: parents defined before children,
    children removed before parents. An account with pending or running jobs in its
    subtree cannot be removed."""
    changes: list[AccountChange] = []
    for path in sorted(tree, key=_depth_first):
        current = state.accounts.get(path)
        if current is None:
            changes.append(AccountChange(kind="define", path=path, settings=tree[path]))
        elif current != tree[path]:
            changes.append(AccountChange(kind="update", path=path, settings=tree[path]))
    gone = [path for path in state.accounts if path not in tree]
    errors: list[FieldError] = []
    busy = _busy_subtrees(state)
    for path in sorted(gone, key=_depth_first, reverse=True):
        holding = busy.get(path)
        if holding:
            holders = first_few(holding, "more accounts")
            errors.append(
                FieldError(
                    field=f"accounts.{path}",
                    value=path,
                    message=f"cannot remove it: pending or running jobs in {holders}",
                )
            )
        else:
            changes.append(AccountChange(kind="remove", path=path))
    if len(changes) > MAX_CHANGES:
        errors.append(
            FieldError(
                field="accounts",
                value=f"{len(changes)} changes",
                message=f"one apply defines, updates or removes at most {MAX_CHANGES} "
                "accounts: apply the tree in steps",
            )
        )
    return changes, errors


def _busy_subtrees(state: State) -> dict[str, list[str]]:
    """Path -> the accounts in its subtree (itself included) with pending or running jobs,
    sorted: found once for every path, not by searching all of them for each."""
    busy = {job.spec.account for job in state.jobs.values() if not job.status.terminal}
    subtrees: dict[str, list[str]] = {}
    for account in sorted(busy):
        for path in ancestry(account):
            subtrees.setdefault(path, []).append(account)
    return subtrees


def first_few(names: list[str], more: str = "more", shown: int = 5) -> str:
    """The first few of many names, and how many more: an error need not list thousands."""
    listed = ", ".join(names[:shown])
    return f"{listed} and {len(names) - shown} {more}" if len(names) > shown else listed


def _depth_first(path: str) -> tuple[int, str]:
    return (path.count("/"), path)


def _where(error: msgspec.ValidationError) -> tuple[str, str]:
    """'Expected `int`, got `str` - at `$.weight`' -> ('weight', 'Expected `int`, got `str`');
    'Object contains unknown field `colour` - at `$`' -> ('colour', ...)."""
    message, _, where = str(error).partition(" - at `$")
    field = re.sub(r"[\[\]'\"]+", ".", where.rstrip("`")).strip(".")
    unknown = _UNKNOWN_FIELD.search(message)
    if unknown:
        field = f"{field}.{unknown[1]}".lstrip(".")
    return field, message


def _lookup(entry: Mapping[str, Any], field: str) -> object:
    value: object = entry
    for part in field.split("."):
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        else:
            return ""
    return value
