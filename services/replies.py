"""Field errors that every command service answers with."""

import re

import msgspec

from allot.proto.commands import FieldError

_AT_PATH = re.compile(r"at `\$\.?([^`]*)`")


def not_stored(error: Exception) -> FieldError:
    """The log did not take the command; the client retries (safely: ids are fixed)."""
    return FieldError(field="log", value="", message=f"not stored, retry: {error}")


def decode_error(error: msgspec.DecodeError) -> FieldError:
    """Turn msgspec's 'Expected `int`, got `str` - at `$.spec.gpus`' into a field error."""
    text = str(error)
    match = _AT_PATH.search(text)
    field = (match.group(1) if match else "") or "request"
    field = field.removeprefix("spec.")
    return FieldError(field=field, value="", message=text.split(" - at ")[0])
