"""Commands: request/reply messages between clients and the intake service."""

from typing import Any, Literal

import msgspec

from allot.proto.events import JobSpec


class FieldError(msgspec.Struct, frozen=True, kw_only=True):
    """A rejected input: which field, the value given, and what would be accepted."""

    field: str
    value: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}={self.value!r}: {self.message}"


class SubmitRequest(msgspec.Struct, frozen=True, kw_only=True):
    spec: JobSpec
    idempotency_key: str | None = None


class SubmitReply(msgspec.Struct, frozen=True, kw_only=True):
    job_id: str | None = None
    duplicate: bool = False
    seq: int | None = None
    errors: list[FieldError] = []


class CancelRequest(msgspec.Struct, frozen=True, kw_only=True):
    job_id: str
    reason: str = ""


class CancelReply(msgspec.Struct, frozen=True, kw_only=True):
    job_id: str
    seq: int | None = None
    errors: list[FieldError] = []


class NodeCommandRequest(msgspec.Struct, frozen=True, kw_only=True):
    """Cordon a node (nothing new lands on it; with ``drain`` its jobs are also stopped
    gracefully, each once past its minimum runtime) or uncordon it."""

    node_id: str
    action: Literal["cordon", "uncordon"]
    drain: bool = False
    reason: str = ""


class NodeCommandReply(msgspec.Struct, frozen=True, kw_only=True):
    node_id: str
    seq: int | None = None
    errors: list[FieldError] = []


class AccountsApplyRequest(msgspec.Struct, frozen=True, kw_only=True):
    """The whole account tree as a file declares it: path -> settings as written there
    (``max_wait`` as a duration such as ``"4h"``). The ledger validates and converts it."""

    accounts: dict[str, dict[str, Any]]


class AccountsApplyReply(msgspec.Struct, frozen=True, kw_only=True):
    defined: list[str] = []
    updated: list[str] = []
    removed: list[str] = []
    errors: list[FieldError] = []


class BudgetGrantRequest(msgspec.Struct, frozen=True, kw_only=True):
    """A budget for an account: ``gpu_hours`` per ``period``, or a ``share`` (0..1) of the
    cluster's GPU time per period. Durations are written as in files: ``7d``, ``12h``."""

    account: str
    period: str = "7d"
    gpu_hours: float | None = None
    share: float | None = None


class BudgetGrantReply(msgspec.Struct, frozen=True, kw_only=True):
    account: str = ""
    gpu_ms: int = 0
    period_ns: int = 0
    seq: int | None = None
    errors: list[FieldError] = []
