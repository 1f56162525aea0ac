"""The bounds checked before decoding, against a plain reading of the JSON."""

import json

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from allot.proto.limits import MAX_DEPTH, check_json


def depth(data: bytes) -> int:
    """Nesting depth by reading every character, strings and escapes included."""
    deepest = level = 0
    in_string = escaped = False
    for char in data.decode():
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            level += 1
            deepest = max(deepest, level)
        elif char in "]}":
            level -= 1
    return deepest


tricky_text = st.text(alphabet='[]{}"\\ab\u00fc', max_size=12)
values = st.recursive(
    st.none() | st.integers() | tricky_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(tricky_text, inner, max_size=3),
    max_leaves=60,
)


def nested(value: object, levels: int) -> object:
    for level in range(levels):
        value = [value] if level % 2 else {'k]\\"{': value}
    return value


@settings(max_examples=400)
@given(values, st.integers(min_value=0, max_value=2 * MAX_DEPTH))
def test_depth_is_judged_as_a_full_reading_judges_it(value: object, levels: int) -> None:
    data = json.dumps(nested(value, levels)).encode()
    if depth(data) <= MAX_DEPTH:
        check_json(data, 1 << 20)
    else:
        with pytest.raises(msgspec.DecodeError, match="nested deeper"):
            check_json(data, 1 << 20)


def test_size_is_checked_first_and_named() -> None:
    with pytest.raises(msgspec.DecodeError, match="11 bytes; at most 10"):
        check_json(b'"123456789"', 10)


def test_an_unterminated_string_of_escapes_is_read_once() -> None:
    # Skipping strings by a backtracking pattern took 26 s for 64 KB of this, and hours for
    # a megabyte: one such message would have stalled every service's fold.
    data = b"[" * 33 + b'"' + b'\\"' * ((1 << 20) // 2 - 40)
    with pytest.raises(msgspec.DecodeError, match="nested deeper"):
        check_json(data, 1 << 20)
