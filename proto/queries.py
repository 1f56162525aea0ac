"""Questions to the read model (``allot.services.view``), and its answers.

Queries are requests on ``allot.cmd.<principal>.query.<kind>``, sent and authorised like the
commands (``allot.proto.subjects``), but they change nothing. The read model folds the log
once and answers from what it folded: every answer names the sequence it is true at
(``seq``), and the queue is the planner's, in the order and with the reasons of the policy
the planner recorded, never a re-plan with defaults. An answer is bounded: a list says
whether there is ``more`` and where the next page begins.
"""

from typing import Annotated, Any, Final

import msgspec

from allot.proto.commands import Contract, FieldError
from allot.proto.limits import ACCOUNT_PATTERN
from allot.proto.subjects import MAX_ID

QUERY: Final = "query."
JOBS: Final = "query.jobs"
JOB: Final = "query.job"
QUEUE: Final = "query.queue"
EXPLAIN: Final = "query.explain"
NODES: Final = "query.nodes"
ACCOUNTS: Final = "query.accounts"

MAX_ROWS: Final = 5000  # rows of one answer
MAX_FILTERS: Final = 64  # values of one filter
DEFAULT_WINDOW_NS: Final = 7 * 86400 * 10**9
MAX_WINDOW_NS: Final = 366 * 86400 * 10**9

Rows = Annotated[int, msgspec.Meta(ge=1, le=MAX_ROWS)]
Id = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_ID)]
Account = Annotated[str, msgspec.Meta(pattern=ACCOUNT_PATTERN)]
JobState = Annotated[
    str,
    msgspec.Meta(
        pattern="^(pending|admitted|running|preempted|succeeded|failed|cancelled|lost|rejected)$"
    ),
]
Principal = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_-]{1,64}$")]


class _Query(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``at_least``: answer once the read model has folded the log up to this sequence
    (the asker's own last write, or the log's end when it asked), waiting a moment for it:
    a reader sees what it has just done."""

    at_least: Annotated[int, msgspec.Meta(ge=0)] = 0


class JobsQuery(_Query, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Jobs, newest first, that match every filter given: a state, an account (or one below
    it), who submitted it, the job array it is a task of. The tasks of an array come newest
    first by index. ``before``, ``before_index`` and ``before_id``: only jobs submitted
    before this sequence, or at it with a lower index, or with the same and a lower id (the
    ``next_before``, ``next_before_index`` and ``next_before_id`` of the previous page:
    the jobs of one batch share a sequence and an index, docs/adr/0036)."""

    states: Annotated[list[JobState], msgspec.Meta(max_length=MAX_FILTERS)] = []
    accounts: Annotated[list[Account], msgspec.Meta(max_length=MAX_FILTERS)] = []
    users: Annotated[list[Principal], msgspec.Meta(max_length=MAX_FILTERS)] = []
    array: Id | None = None
    limit: Rows = 100
    before: Annotated[int, msgspec.Meta(ge=1)] | None = None
    before_index: Annotated[int, msgspec.Meta(ge=0)] = 0
    before_id: Annotated[str, msgspec.Meta(max_length=MAX_ID)] = ""


class JobQuery(_Query, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One job, whole; or a job array at a glance (``{"array": ...}``)."""

    job_id: Id


class QueueQuery(_Query, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Waiting jobs in the planner's order, from position ``offset + 1``."""

    accounts: Annotated[list[Account], msgspec.Meta(max_length=MAX_FILTERS)] = []
    limit: Rows = 500
    offset: Annotated[int, msgspec.Meta(ge=0)] = 0


class ExplainQuery(_Query, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Why a job is where it is, and its whole trail; of a job array, its glance and the
    first of its tasks that waits (``{"array": ..., "task": ...}``)."""

    job_id: Id


class NodesQuery(_Query, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Every node, or one; in pages, by id: ``after`` the last of the previous page."""

    node_id: Id | None = None
    after: Id | None = None


class AccountsQuery(_Query, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The account tree with each account's share, usage over ``window_ns``, fair-share
    rank and budget."""

    window_ns: Annotated[int, msgspec.Meta(ge=10**9, le=MAX_WINDOW_NS)] = DEFAULT_WINDOW_NS


class Answer(msgspec.Struct, frozen=True, kw_only=True):
    """What the read model says, true at the log's sequence ``seq``. ``data`` is the
    answer itself (its shape is the query's: see ``allot.services.view``); with ``more``,
    a list was cut at the query's limit. A non-empty ``errors`` means no answer."""

    seq: int = 0
    data: Any = None
    more: bool = False
    next_before: int | None = None  # jobs: where the next page begins
    next_before_index: int = 0
    next_before_id: str = ""
    total: int | None = None  # queue: how many wait in all
    # Events of the log the fold refused: no error of the query, but an operator should know.
    ignored_count: int = 0
    ignored: list[str] = []  # the latest few, as "SEQ TYPE: why"
    errors: list[FieldError] = []


# Every query, by its name in the subject (``allot.cmd.<principal>.query.<kind>``).
QUERIES: Final[dict[str, Contract]] = {
    JOBS: Contract(JobsQuery, Answer, "Jobs, newest first, by state, account or submitter"),
    JOB: Contract(JobQuery, Answer, "One job"),
    QUEUE: Contract(QueueQuery, Answer, "Waiting jobs in the planner's recorded order"),
    EXPLAIN: Contract(ExplainQuery, Answer, "Why a job waits, where it runs, its trail"),
    NODES: Contract(NodesQuery, Answer, "Nodes, their GPUs, health and jobs"),
    ACCOUNTS: Contract(AccountsQuery, Answer, "The account tree: shares, usage, ranks, budgets"),
}
