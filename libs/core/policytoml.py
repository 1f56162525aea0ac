"""A planning policy as TOML text, and back: every field of ``Policy``, each checked.

A policy file states the whole ``Policy``, nested tables too (``examples/policy.toml``)::

    name = "mine"               # required: plans record the policy by its name and hash
    order = "fair-share"        # fair-share | fifo | tier | multifactor
    aging_step = "1h"
    grounds = ["TIER", "DRAIN"]
    time_slice = "none"
    [fair_share]
    half_life = "7d"

A duration's key is its field's name without ``_ns``; it takes seconds (``90``, ``0.5``) or
the strings ``parse_duration`` reads (``"90s"``, ``"30m"``, ``"7d"``), and ``"none"`` where
the field may be unset. A key left out keeps the default policy's value (``allot``'s).
Every problem is a ``FieldError`` naming the key, the value given and what is accepted;
all of them are reported at once. ``policy_toml`` writes a policy that reads back equal,
with the same hash. Pure: the caller reads the file.
"""

import difflib
import json
import re
import tomllib
from collections.abc import Mapping
from decimal import Decimal
from fractions import Fraction
from typing import Any, get_args

import msgspec

from allot.core.durations import format_duration, parse_duration
from allot.core.fairshare import FairSharePolicy
from allot.core.planning import Policy
from allot.proto.codes import DRAIN, FAIR_SHARE, FUNDED, LENT, PACK, RECLAIM, STALL, TIER
from allot.proto.commands import FieldError

_S = 10**9
# Far past any sensible setting, and well inside the 64-bit integers every reader of the
# policy's JSON (``PolicyAdopted``) decodes.
_MOST_COUNT = 1_000_000
_MOST_NS = 3650 * 86400 * _S  # ten years


class PolicyError(ValueError):
    """A policy that cannot be read: each problem names the field, the value given and
    what is accepted; ``source``, where the policy came from (a file)."""

    def __init__(self, problems: list[FieldError], source: str = ""):
        said = "; ".join(_said(p) for p in problems)
        super().__init__(f"{source}: {said}" if source else said)
        self.problems, self.source = problems, source


def _said(problem: FieldError) -> str:
    if not problem.field:  # the text as a whole
        return problem.message
    return str(problem) if problem.value else f"{problem.field}: {problem.message}"


class _Problem(Exception):
    """A value its rule does not accept; the reader adds the field and the value."""


class _Rule:
    accepted = ""  # what the rule accepts, said in every error about it

    def read(self, given: object) -> object:
        """The field's value from what TOML gave; raises ``_Problem``."""
        raise NotImplementedError

    def read_text(self, text: str) -> object:
        """The field's value from a command line's text."""
        return self.read(text)

    def write(self, value: Any) -> str:
        """The value as TOML."""
        raise NotImplementedError

    def refuse(self) -> _Problem:
        return _Problem(self.accepted)


class _Duration(_Rule):
    def __init__(self, least_ns: int = 0, unset: str | None = None):
        self.least_ns, self.unset = least_ns, unset
        least = "more than 0s" if least_ns == 1 else f"{format_duration(least_ns)} or more"
        self.accepted = (
            'a duration: seconds (90, 0.5) or d, h, m and s such as "90s", "30m", "1h30m", '
            f'"7d"; {least}, at most {format_duration(_MOST_NS)}'
            + (f'; or "none": {unset}' if unset else "")
        )

    def read(self, given: object) -> int | None:
        if self.unset and given == "none":
            return None
        if isinstance(given, bool):
            raise self.refuse()
        if isinstance(given, int):
            ns = given * _S
        elif isinstance(given, Decimal):
            # Bounded before any arithmetic (1e999999999 is a TOML float), then exact.
            if not (given.is_finite() and given.copy_abs() <= _MOST_NS // _S):
                raise self.refuse()
            exact = Fraction(given) * _S
            if exact.denominator != 1:  # finer than a nanosecond
                raise self.refuse()
            ns = exact.numerator
        elif isinstance(given, str):
            try:
                ns = parse_duration(given)
            except ValueError:
                raise self.refuse() from None
        else:
            raise self.refuse()
        if not self.least_ns <= ns <= _MOST_NS:
            raise self.refuse()
        return ns

    def read_text(self, text: str) -> object:
        if re.fullmatch(r"\d{1,20}", text):
            return self.read(int(text))
        if re.fullmatch(r"\d{0,20}\.\d{1,20}", text):
            return self.read(Decimal(text))
        return self.read(text)

    def write(self, value: int | None) -> str:
        if value is None:
            return '"none"'
        seconds, part = divmod(value, _S)
        if part:  # a part of a second, which the strings cannot say
            return f"{seconds}.{part:09d}".rstrip("0")
        return json.dumps(format_duration(value))


class _Count(_Rule):
    def __init__(self, least: int, most: int = _MOST_COUNT):
        self.least, self.most = least, most
        self.accepted = f"a whole number from {least} to {most}"

    def read(self, given: object) -> int:
        if isinstance(given, bool) or not isinstance(given, int):
            raise self.refuse()
        if not self.least <= given <= self.most:
            raise self.refuse()
        return given

    def read_text(self, text: str) -> object:
        return self.read(int(text) if re.fullmatch(r"-?\d{1,20}", text) else text)

    def write(self, value: int) -> str:
        return str(value)


class _Flag(_Rule):
    accepted = "true or false"

    def read(self, given: object) -> bool:
        if not isinstance(given, bool):
            raise self.refuse()
        return given

    def read_text(self, text: str) -> object:
        return self.read({"true": True, "false": False}.get(text, text))

    def write(self, value: bool) -> str:
        return "true" if value else "false"


class _Choice(_Rule):
    def __init__(self, options: tuple[str, ...]):
        self.options = options
        self.accepted = "one of " + ", ".join(json.dumps(o) for o in options)

    def read(self, given: object) -> str:
        if given not in self.options:
            raise self.refuse()
        assert isinstance(given, str)
        return given

    def write(self, value: str) -> str:
        return json.dumps(value)


class _Choices(_Rule):
    """Some of the options, each at most once, in the order given (it is part of the hash,
    not of the decisions)."""

    def __init__(self, options: tuple[str, ...]):
        self.options = options
        self.accepted = "a list of distinct names from " + ", ".join(json.dumps(o) for o in options)

    def read(self, given: object) -> tuple[str, ...]:
        if not isinstance(given, list) or any(g not in self.options for g in given):
            raise self.refuse()
        if len(set(given)) != len(given):
            raise self.refuse()
        return tuple(given)

    def read_text(self, text: str) -> object:
        return self.read([t.strip() for t in text.split(",") if t.strip()])

    def write(self, value: tuple[str, ...]) -> str:
        return "[" + ", ".join(json.dumps(v) for v in value) + "]"


class _Name(_Rule):
    accepted = "1 to 64 letters, digits, '.', '_' or '-'"

    def read(self, given: object) -> str:
        if not isinstance(given, str) or not re.fullmatch(r"[A-Za-z0-9._-]{1,64}", given):
            raise self.refuse()
        return given

    def write(self, value: str) -> str:
        return json.dumps(value)


# Every field of ``Policy``, nested ones by their path (a test holds this to the struct).
RULES: dict[str, _Rule] = {
    "name": _Name(),
    "fair_share.half_life_ns": _Duration(least_ns=1),
    "fair_share.window_ns": _Duration(least_ns=1, unset="usage decays by the half-life"),
    "fair_share.basis": _Choice(get_args(FairSharePolicy.__annotations__["basis"])),
    "aging_step_ns": _Duration(least_ns=1),
    "aging_max_ranks": _Count(0),
    "backfill": _Flag(),
    "preemption": _Flag(),
    "preemptors_per_cycle": _Count(0),
    "restart_overhead_ns": _Duration(),
    "time_slice_ns": _Duration(unset="fair share stops no running job"),
    "order": _Choice(get_args(Policy.__annotations__["order"])),
    "strict": _Flag(),
    "quotas": _Flag(),
    "grounds": _Choices((TIER, FUNDED, RECLAIM, FAIR_SHARE, DRAIN, PACK, LENT, STALL)),
    "max_age_ns": _Duration(least_ns=1),
    "queue_depth": _Count(1),
    "fill_depth": _Count(0),
    "reservations": _Count(1),
}


def _key(field: str, path: str) -> str:
    """A field's key in TOML: a duration's without its ``_ns``."""
    return field.removesuffix("_ns") if isinstance(RULES.get(path), _Duration) else field


def _is_struct(kind: object) -> bool:
    return isinstance(kind, type) and issubclass(kind, msgspec.Struct)


def _keys(kind: type[msgspec.Struct], prefix: str = "") -> dict[str, tuple[str, Any]]:
    """The struct's keys as TOML writes them -> (its field, the field's type). ``prefix``:
    the struct's own path (a table's key is its field's name: only durations are renamed)."""
    return {_key(f.name, prefix + f.name): (f.name, f.type) for f in msgspec.structs.fields(kind)}


def read_policy(text: str) -> Policy:
    """The policy ``text`` states; raises ``PolicyError`` naming every problem."""
    try:
        given = tomllib.loads(text, parse_float=Decimal)  # 0.1 s is 0.1 s, to the ns
    except tomllib.TOMLDecodeError as error:
        raise PolicyError([FieldError(field="", value="", message=f"not TOML: {error}")]) from None
    except RecursionError:  # tomllib recurses into nested arrays and tables
        raise PolicyError(
            [FieldError(field="", value="", message="not TOML: nested too deep")]
        ) from None
    problems: list[FieldError] = []
    if "name" not in given:
        problems.append(
            FieldError(
                field="name", value="", message="required; plans record the policy by its name"
            )
        )
    policy = _read_struct(Policy, given, "", problems)
    if problems:
        raise PolicyError(problems)
    assert isinstance(policy, Policy)
    return policy


def _read_struct(
    kind: type[msgspec.Struct], given: Mapping[str, Any], prefix: str, problems: list[FieldError]
) -> msgspec.Struct:
    keys = _keys(kind, prefix)
    for key in given:
        if key not in keys:
            problems.append(
                FieldError(
                    field=prefix + key, value=_shown(given[key]), message=_unknown(key, keys)
                )
            )
    values: dict[str, object] = {}
    for key, (field, field_type) in keys.items():
        if key not in given:
            continue  # the default's
        if _is_struct(field_type):
            table = given[key]
            if not isinstance(table, dict):
                known = ", ".join(_keys(field_type, f"{prefix}{field}."))
                problems.append(
                    FieldError(
                        field=prefix + key, value=_shown(table), message=f"a table of {known}"
                    )
                )
                continue
            values[field] = _read_struct(field_type, table, f"{prefix}{field}.", problems)
            continue
        try:
            values[field] = RULES[prefix + field].read(given[key])
        except _Problem as problem:
            problems.append(
                FieldError(field=prefix + key, value=_shown(given[key]), message=str(problem))
            )
    return kind(**values)


def _unknown(key: str, keys: Mapping[str, object]) -> str:
    near = difflib.get_close_matches(key, list(keys), n=1)
    hint = f"; did you mean {near[0]!r}?" if near else "."
    return f"no such key{hint} Known keys: {', '.join(keys)}"


def _shown(value: object, depth: int = 0) -> str:
    """A value given, as the file wrote it, shortened (and only a few levels deep)."""
    if depth > 3 and isinstance(value, dict | list):
        text = "..."
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, str):
        text = json.dumps(value) if depth else value
    elif isinstance(value, dict):
        inner = (f"{k} = {_shown(v, depth + 1)}" for k, v in list(value.items())[:10])
        text = "{" + ", ".join(inner) + "}"
    elif isinstance(value, list):
        text = "[" + ", ".join(_shown(v, depth + 1) for v in value[:10]) + "]"
    else:
        text = str(value)
    return text if len(text) <= 100 else text[:100] + "..."


def policy_toml(policy: Policy) -> str:
    """``policy`` as TOML that ``read_policy`` reads back equal: every field."""
    return "\n".join(_write_struct(policy, "")) + "\n"


def _write_struct(value: msgspec.Struct, prefix: str) -> list[str]:
    lines, tables = [], []
    for key, (field, field_type) in _keys(type(value), prefix).items():
        inner = getattr(value, field)
        if _is_struct(field_type):
            tables += ["", f"[{prefix}{key}]", *_write_struct(inner, f"{prefix}{field}.")]
        else:
            lines.append(f"{key} = {RULES[prefix + field].write(inner)}")
    return lines + tables  # a table's keys come after the keys above it


def read_setting(key: str, text: str) -> object:
    """One setting from a command line (``"fair_share.half_life"``, ``"7d"``), as its
    field holds it; raises ``PolicyError``."""
    field = _field_path(key)
    try:
        return RULES[field].read_text(text)
    except _Problem as problem:
        raise PolicyError([FieldError(field=key, value=text, message=str(problem))]) from None


def with_settings(policy: Policy, settings: Mapping[str, object]) -> Policy:
    """``policy`` with the settings read by ``read_setting`` (by key) in place of its own."""
    for key, value in settings.items():
        policy = _replaced(policy, _field_path(key).split("."), value)
    return policy


def _replaced(struct: Any, path: list[str], value: object) -> Any:
    field, *rest = path
    inner = _replaced(getattr(struct, field), rest, value) if rest else value
    return msgspec.structs.replace(struct, **{field: inner})


def _key_path(path: str) -> str:
    """A field's path as TOML writes it: ``fair_share.half_life_ns`` ->
    ``fair_share.half_life``."""
    parts = path.split(".")
    return ".".join(_key(part, ".".join(parts[: n + 1])) for n, part in enumerate(parts))


# Setting keys (``fair_share.half_life``) -> the fields they set (``fair_share.half_life_ns``).
_FIELDS = {_key_path(path): path for path in RULES}


def _field_path(key: str) -> str:
    return _FIELDS[key]
