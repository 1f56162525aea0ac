"""Commands: request/reply messages between clients and the services that answer them.

A request with a field it does not know is refused, naming the field: a client that
misspells one learns so at once instead of getting a job or a grant without it.
"""

import difflib
import functools
import re
from typing import Annotated, Any, Literal

import msgspec

from allot.proto.events import ArrayTasks, JobSpec
from allot.proto.limits import MAX_BATCH_JOBS, MAX_KEY, MAX_REASON, shown
from allot.proto.subjects import (
    ACCOUNTS_APPLY,
    ADMIN,
    BUDGET_GRANT,
    CANCEL,
    NODE_COMMAND,
    SUBMIT,
    SUBMIT_MANY,
)

Reason = Annotated[
    str, msgspec.Meta(description="why, in words", extra_json_schema={"maxLength": MAX_REASON})
]


class FieldError(msgspec.Struct, frozen=True, kw_only=True):
    """A rejected input: which field, the value given, and what would be accepted."""

    field: str
    value: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}={self.value!r}: {self.message}"


_AT_PATH = re.compile(r" - at `\$\.?([^`]*)`$")
_UNKNOWN = re.compile(r"^Object contains unknown field `(.*)`$")
_MISSING = re.compile(r"^Object missing required field `(.*)`$")
_STEP = re.compile(r"\.?([^.\[]+)|\[(\d+|\.\.\.)\]")


def decode_problem(error: msgspec.MsgspecError, given: object, kind: type) -> FieldError:
    """msgspec's "Expected `int`, got `str` - at `$.spec.gpus`" for a ``kind`` decoded
    from ``given`` (the same message decoded untyped, or None where it is not JSON) as a
    field error: the field (``spec.`` left out, as the checks after decoding name it), the
    value it got, and what is accepted. An unknown field is named, with the nearest known
    one."""
    text = str(error)
    where = _AT_PATH.search(text)
    steps = [name or index for name, index in _STEP.findall(where.group(1) if where else "")]
    message = text[: where.start()] if where else text
    if unknown := _UNKNOWN.match(message):
        steps.append(unknown.group(1))
        message = _no_such_field(steps[-1], _field_names(kind, steps[:-1]))
    elif missing := _MISSING.match(message):
        steps.append(missing.group(1))
        message = "required"
    return FieldError(
        field=_field_name(steps), value=_value_at(given, steps), message=shown(message, 1000)
    )


def unknown_field(given: object, kind: type) -> FieldError | None:
    """The first field of ``given`` (a request decoded as plain JSON) that ``kind`` does not
    have, at any depth, as the error that names it; None if there is none. Requests are
    held to this; events are not, since a reader must take what a newer writer added."""
    return _unknown(given, _type_info(kind), [])


@functools.cache
def _type_info(kind: type) -> Any:
    """msgspec's description of ``kind``: half a millisecond to make, so made once."""
    return msgspec.inspect.type_info(kind)


@functools.cache
def _fields(kind: type) -> dict[str, Any]:
    """A struct's fields by the name they have in JSON, with what each holds."""
    return {f.encode_name: f.type for f in _type_info(kind).fields}


@functools.cache
def _nesting(kind: type) -> dict[str, Any]:
    """Those of a struct's fields that can hold a struct (in a list, or optional too): the
    only places below it where a field of the wrong name can be."""
    return {name: info for name, info in _fields(kind).items() if _holds_struct(info)}


def _holds_struct(info: Any) -> bool:
    if isinstance(info, msgspec.inspect.StructType):
        return True
    if isinstance(info, msgspec.inspect.UnionType):
        return any(_holds_struct(t) for t in info.types)
    if isinstance(info, msgspec.inspect.ListType):
        return _holds_struct(info.item_type)
    return False


def _unknown(given: object, info: Any, steps: list[str]) -> FieldError | None:
    if isinstance(info, msgspec.inspect.UnionType):  # Optional[...]: the one non-null type
        kinds = [t for t in info.types if not isinstance(t, msgspec.inspect.NoneType)]
        info = kinds[0] if len(kinds) == 1 else None
    if isinstance(info, msgspec.inspect.StructType) and isinstance(given, dict):
        fields = _fields(info.cls)
        if given.keys() <= fields.keys():  # all known here: look only where structs nest
            for key, inner in _nesting(info.cls).items():
                if key in given and (problem := _unknown(given[key], inner, [*steps, key])):
                    return problem
            return None
        for key, value in given.items():
            if key not in fields:
                return FieldError(
                    field=_field_name([*steps, key]),
                    value=_value_at(value, []),
                    message=_no_such_field(key, list(fields)),
                )
            if problem := _unknown(value, fields[key], [*steps, key]):
                return problem
    elif isinstance(info, msgspec.inspect.ListType) and isinstance(given, list):
        for index, value in enumerate(given):
            if problem := _unknown(value, info.item_type, [*steps, str(index)]):
                return problem
    return None


def _field_name(steps: list[str]) -> str:
    """``["spec", "command", "1"]`` as the checks after decoding name it: ``command[1]``."""
    field = "".join(f"[{s}]" if s.isdigit() or s == "..." else f".{s}" for s in steps)
    return shown(field.removeprefix(".").removeprefix("spec.") or "request")


def _no_such_field(name: str, known: list[str]) -> str:
    near = [k for k in known if k[:3] == name[:3]] or difflib.get_close_matches(name, known, n=1)
    hint = f"; did you mean {near[0]!r}?" if near else "."
    return f"no such field{hint} Accepted: {', '.join(known)}" if known else "no such field"


def _field_names(kind: type, steps: list[str]) -> list[str]:
    """The fields of the struct that ``steps`` lead to from ``kind``; [] if none."""
    info: Any = _type_info(kind)
    for step in steps:
        if isinstance(info, msgspec.inspect.StructType):
            info = next((f.type for f in info.fields if f.encode_name == step), None)
        elif isinstance(info, msgspec.inspect.ListType):
            info = info.item_type
        elif isinstance(info, msgspec.inspect.DictType):
            info = info.value_type
        if isinstance(info, msgspec.inspect.UnionType):  # Optional[...]: the one struct
            info = next((t for t in info.types if isinstance(t, msgspec.inspect.StructType)), info)
    return (
        [f.encode_name for f in info.fields] if isinstance(info, msgspec.inspect.StructType) else []
    )


def _value_at(given: object, steps: list[str]) -> str:
    """What ``given`` holds at ``steps``, as a reply may repeat it; "" where it cannot say
    (a dict's key, which msgspec does not name, or no request at all)."""
    value = given
    for step in steps:
        if isinstance(value, dict) and step in value:
            value = value[step]
        elif isinstance(value, list) and step.isdigit() and int(step) < len(value):
            value = value[int(step)]
        else:
            return ""
    return "" if given is None else shown(msgspec.json.encode(value).decode())


class SubmitRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    spec: JobSpec
    idempotency_key: (
        Annotated[
            str,
            msgspec.Meta(
                description="the same key from the same sender and account: the same job, "
                "submitted once",
                extra_json_schema={"minLength": 1, "maxLength": MAX_KEY},
            ),
        ]
        | None
    ) = None
    array: ArrayTasks | None = None  # submit the spec as a job array, one task per index


class SubmitReply(msgspec.Struct, frozen=True, kw_only=True):
    job_id: str | None = None
    duplicate: bool = False
    seq: int | None = None
    errors: list[FieldError] = []


class SubmitManyRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Several submissions in one request, each taken as if sent alone: what a client
    sends for the submissions asked of it while its earlier requests are on their way."""

    submissions: Annotated[
        list[SubmitRequest], msgspec.Meta(min_length=1, max_length=MAX_BATCH_JOBS)
    ]


class SubmitManyReply(msgspec.Struct, frozen=True, kw_only=True):
    """A reply for each submission, in the request's order; ``errors``: the request as a
    whole was refused (it is no list of submissions), and none of them was taken."""

    replies: list[SubmitReply] = []
    errors: list[FieldError] = []


class CancelRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    job_id: str  # or an array's id: every task of it that has not ended
    reason: Reason = ""


class CancelReply(msgspec.Struct, frozen=True, kw_only=True):
    job_id: str
    seq: int | None = None
    errors: list[FieldError] = []


class NodeCommandRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Cordon a node (nothing new lands on it; with ``drain`` its resumable jobs are also
    stopped, each once past its minimum runtime, and the others left to finish; with
    ``now`` as well, every job is stopped once past its minimum runtime) or uncordon it."""

    node_id: str
    action: Literal["cordon", "uncordon"]
    drain: bool = False
    reason: Reason = ""
    now: Annotated[
        bool,
        msgspec.Meta(
            description="with drain: stop every job once past its minimum runtime, also "
            "those that cannot resume (their work is lost)"
        ),
    ] = False


class NodeCommandReply(msgspec.Struct, frozen=True, kw_only=True):
    node_id: str
    seq: int | None = None
    errors: list[FieldError] = []


class AccountsApplyRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The whole account tree as a file declares it: path -> settings as written there
    (``max_wait`` as a duration such as ``"4h"``). The ledger validates and converts it."""

    accounts: dict[str, dict[str, Any]]


class AccountsApplyReply(msgspec.Struct, frozen=True, kw_only=True):
    defined: list[str] = []
    updated: list[str] = []
    removed: list[str] = []
    errors: list[FieldError] = []


class BudgetGrantRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
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


class Contract(msgspec.Struct, frozen=True):
    """What one command takes and answers: the request, the reply, and what it does."""

    request: type[msgspec.Struct]
    reply: type[msgspec.Struct]
    summary: str


# Every command, by its name in the subject (``allot.cmd.<principal>.<name>``). An operator
# sends ``submit`` and ``cancel`` also as ``admin.submit`` and ``admin.cancel``, for anyone.
CONTRACTS: dict[str, Contract] = {
    SUBMIT: Contract(SubmitRequest, SubmitReply, "Submit a job to an account the sender may use"),
    SUBMIT_MANY: Contract(
        SubmitManyRequest, SubmitManyReply, "Submit several jobs, each as if alone"
    ),
    CANCEL: Contract(CancelRequest, CancelReply, "Cancel a job the sender may cancel"),
    ADMIN + SUBMIT: Contract(SubmitRequest, SubmitReply, "Submit a job to any account (operators)"),
    ADMIN + SUBMIT_MANY: Contract(
        SubmitManyRequest, SubmitManyReply, "Submit several jobs to any accounts (operators)"
    ),
    ADMIN + CANCEL: Contract(CancelRequest, CancelReply, "Cancel any job (operators)"),
    NODE_COMMAND: Contract(
        NodeCommandRequest, NodeCommandReply, "Cordon, drain or uncordon a node (operators)"
    ),
    ACCOUNTS_APPLY: Contract(
        AccountsApplyRequest, AccountsApplyReply, "Apply the whole account tree (operators)"
    ),
    BUDGET_GRANT: Contract(
        BudgetGrantRequest, BudgetGrantReply, "Grant an account a budget of GPU time (operators)"
    ),
}
