"""A policy chosen on a command line: a registered name, or a TOML file of the whole policy.

A registered name wins over a file of the same name (write ``./slurm`` for the file).
Used by ``allot sim --policy/--compare`` and by the planner service's ``--policy``.
"""

import argparse
from collections.abc import Callable
from pathlib import Path

from allot.core.planning import Policy
from allot.core.policies import POLICIES
from allot.core.policytoml import PolicyError, read_policy, read_setting
from allot.proto.commands import FieldError

MAX_FILE_BYTES = 64 * 1024  # a whole policy is about 500 bytes


def load_policy(spec: str) -> Policy:
    """The policy ``spec`` names or the file it is; raises ``PolicyError``, its message
    beginning with ``spec``."""
    if spec in POLICIES:
        return POLICIES[spec]
    try:
        with Path(spec).open("rb") as file:
            data = file.read(MAX_FILE_BYTES + 1)
    except OSError as error:
        names = ", ".join(sorted(POLICIES))
        reason = error.strerror or str(error)
        message = f"not a named policy ({names}) nor a readable file: {reason}"
        raise _problem(spec, message) from None
    if len(data) > MAX_FILE_BYTES:
        raise _problem(spec, f"larger than {MAX_FILE_BYTES} bytes: not a policy file")
    try:
        text = data.decode()
    except UnicodeDecodeError:
        raise _problem(spec, "not TOML: not UTF-8 text") from None
    try:
        return read_policy(text)
    except PolicyError as error:
        raise PolicyError(error.problems, source=spec) from None


def policy_argument(spec: str) -> Policy:
    """``load_policy`` as an argparse ``type``: a problem is a usage error (exit code 2)."""
    try:
        return load_policy(spec)
    except PolicyError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _problem(spec: str, message: str) -> PolicyError:
    return PolicyError([FieldError(field="", value="", message=message)], source=spec)


def setting_argument(key: str) -> Callable[[str], object]:
    """An argparse ``type`` for a flag that sets one field of a policy (``read_setting``'s
    ``key``), checked as a policy file's would be."""

    def read(text: str) -> object:
        try:
            return read_setting(key, text)
        except PolicyError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    read.__name__ = key  # argparse names it in some of its own messages
    return read
