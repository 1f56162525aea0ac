import msgspec
import pytest

from allot.core import State, apply, known_submission, validate_cancel, validate_submission
from allot.core.validate import spec_problems
from allot.proto.commands import CancelRequest, SubmitRequest
from allot.proto.events import JobSpec
from allot.proto.subjects import is_id, is_principal
from tests import builders as b


def problems(
    state: State | None = None, key: str | None = None, **fields: object
) -> list[tuple[str, str]]:
    spec = {"account": "ml/vision", "gpus": 1, "command": ["python", "train.py"], **fields}
    request = SubmitRequest(spec=JobSpec(**spec), idempotency_key=key)  # type: ignore[arg-type]
    return [(e.field, e.message) for e in validate_submission(request, state or State())]


def test_a_good_submission_passes() -> None:
    assert problems() == []


@pytest.mark.parametrize("gpus", [0, -1])
def test_gpus_must_be_positive(gpus: int) -> None:
    assert problems(gpus=gpus) == [("gpus", "from 1 up to 1024 per worker")]


def test_gpus_beyond_every_node_are_refused_once_nodes_are_known() -> None:
    state = apply(State(), 1, b.node("n1", 8))
    assert problems(state, gpus=9) == [("gpus", "no node has that many GPUs; the largest has 8")]
    assert problems(state, gpus=8) == []


@pytest.mark.parametrize("command", [[], [""], ["  "]])
def test_the_command_cannot_be_empty(command: list[str]) -> None:
    assert problems(command=command) == [("command", "give the program to run and its arguments")]


@pytest.mark.parametrize("account", ["", "ML", "a//b", "/a", "a.b", "a b", "-a"])
def test_malformed_accounts_are_refused(account: str) -> None:
    fields = [field for field, _ in problems(account=account)]
    assert fields == ["account"]


def test_every_problem_is_reported_at_once() -> None:
    fields = [field for field, _ in problems(account="X", gpus=0, command=[], key="")]
    assert fields == ["account", "gpus", "command", "idempotency_key"]


def test_allot_variables_cannot_be_overridden() -> None:
    assert [f for f, _ in problems(env={"CUDA_VISIBLE_DEVICES": "0"})] == ["env"]


def test_cancel_needs_a_known_live_job() -> None:
    state = apply(State(), 1, b.submitted("j1"))
    assert validate_cancel(CancelRequest(job_id="j1"), state) == []
    assert [e.message for e in validate_cancel(CancelRequest(job_id="nope"), state)] == [
        "no such job"
    ]


def test_environment_values_and_workdir_are_checked() -> None:
    assert [f for f, _ in problems(env={"X": "a\0b"})] == ["env.X"]
    assert [f for f, _ in problems(workdir="relative/dir")] == ["workdir"]
    assert problems(workdir="/data/run", env={"X": "1"}) == []


def test_a_known_key_returns_its_job_and_a_reused_key_is_an_error() -> None:
    state = apply(State(), 1, b.submitted("j1", key="k", by="ann"))
    same = SubmitRequest(spec=b.spec(), idempotency_key="k")
    other = SubmitRequest(spec=b.spec(gpus=2), idempotency_key="k")
    assert known_submission(same, "ann", state) == ("j1", [])
    job_id, errors = known_submission(other, "ann", state)
    assert job_id is None
    assert [e.field for e in errors] == ["idempotency_key"]
    new = SubmitRequest(spec=b.spec(), idempotency_key="new")
    assert known_submission(new, "ann", state) == (None, [])
    assert known_submission(same, "ben", state) == (None, [])  # another sender's key


def test_with_a_tree_jobs_go_to_leaf_accounts_of_it() -> None:
    from allot.proto.events import AccountDefined, AccountSettings

    state = State()
    for seq, path in enumerate(["ml", "ml/vision"], start=1):
        apply(state, seq, AccountDefined(meta=b.meta(), path=path, settings=AccountSettings()))
    assert problems(state, account="ml/vision") == []
    assert problems(state, account="ml") == [
        ("account", "a parent account; submit to one of its leaves (a team or user queue)")
    ]
    assert [f for f, _ in problems(state, account="ml/nlp")] == ["account"]


def test_gang_shape_flavor_and_elastic_limits_are_checked_against_the_cluster() -> None:
    state = State()
    for seq, event in enumerate(
        [
            b.node("a1", 8, model="A100", rack="r1", islands=[[0, 1, 2, 3], [4, 5, 6, 7]]),
            b.node("a2", 8, model="A100", rack="r1"),
            b.node("h1", 4, model="H100", rack="r2"),
        ],
        start=1,
    ):
        apply(state, seq, event)
    assert problems(state, workers=2, gpus=8, topology="rack") == []
    assert problems(state, workers=3, gpus=8, topology="rack") == [
        (
            "workers",
            "24 GPUs with topology 'rack' cannot fit: the largest such block in the cluster has 16",
        )
    ]
    assert problems(state, gpus=8, topology="nvlink") == []  # a2: one island of 8
    assert problems(state, workers=2, gpus=8, topology="nvlink") == [
        (
            "workers",
            "16 GPUs with topology 'nvlink' cannot fit: "
            "the largest such block in the cluster has 8",
        )
    ]
    assert problems(state, gpus=8, flavor="H100") == [
        ("gpus", "no node has that many GPUs; the largest has 4")
    ]
    assert problems(state, flavor="V100") == [
        ("flavor", "no node has that GPU model; the cluster has A100, H100")
    ]
    assert problems(state, workers=0) == [("workers", "from 1 up to 4096")]
    assert problems(state, gpus=2, max_gpus=1) == [
        ("max_gpus", "at least gpus (2) and at most 1024, or leave it out")
    ]
    assert problems(state, workers=2, max_gpus=4) == [
        ("max_gpus", "elastic jobs have one worker; leave out workers or max_gpus")
    ]
    assert problems(state, grace_ns=-1) == [("grace", "from 0 up to 1h")]
    assert problems(state, checkpoint_interval_ns=0) == [
        ("checkpoint_interval", "a positive duration up to 365d, or leave it out")
    ]


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"cpus": 2**63 - 1}, "cpus"),
        ({"memory_mib": 2**63 - 1}, "memory_mib"),
        ({"gpus": 2**40}, "gpus"),
        ({"workers": 2**40}, "workers"),
        ({"max_runtime_ns": 2**63 - 1}, "max_runtime"),
        ({"checkpoint_interval_ns": 2**63 - 1}, "checkpoint_interval"),
        ({"command": ["python", "x" * (1 << 20)]}, "command"),
        ({"command": ["true"] * 5000}, "command"),
        ({"env": {f"V{i}": "" for i in range(2000)}}, "env"),
        ({"workdir": "/" + "d" * 5000}, "workdir"),
        ({"flavor": "H" * 100}, "flavor"),
    ],
)
def test_every_number_and_size_a_user_sends_is_bounded(
    fields: dict[str, object], field: str
) -> None:
    assert [f for f, _ in problems(**fields)] == [field]


def test_an_error_never_echoes_a_huge_value() -> None:
    spec = msgspec.structs.replace(b.spec(), name="n" * 1_000_000)
    [error] = validate_submission(SubmitRequest(spec=spec), State())
    assert error.field == "name"
    assert len(error.value) < 300


def test_cpus_and_memory_are_held_to_the_largest_node_that_reports_them() -> None:
    state = apply(State(), 1, b.node("n1", 8))
    assert problems(state, cpus=1000) == []  # simulated nodes report no CPUs: not held
    big = msgspec.structs.replace(b.node("n2", 8), cpus=64, memory_mib=512_000)
    state = apply(state, 2, big)
    assert problems(state, cpus=64, memory_mib=512_000) == []
    assert problems(state, cpus=65, memory_mib=512_001) == [
        ("cpus", "no node has that many CPUs; the largest has 64"),
        ("memory_mib", "no node has that much memory; the largest has 512000 MiB"),
    ]


def test_spec_problems_need_no_state_and_agree_with_the_intake() -> None:
    bad = msgspec.structs.replace(b.spec(gpus=0), cpus=-1, command=[])
    assert [e.field for e in spec_problems(bad)] == ["gpus", "cpus", "command"]
    assert spec_problems(b.spec()) == []


def _stated_limits() -> list[tuple[str, str, int | None, int | None]]:
    """(field, kind of limit, lowest, highest) for every limit the submit schema states on
    a spec field: what a publisher in another language checks before it sends."""
    schema = msgspec.json.schema(SubmitRequest)["$defs"]["JobSpec"]["properties"]
    found = []
    for field, prop in schema.items():
        stated = next((p for p in [prop, *prop.get("anyOf", [])] if "type" in p), prop)
        for low, high, kind in [
            ("minimum", "maximum", "number"),
            ("minLength", "maxLength", "length"),
            ("minItems", "maxItems", "items"),
            ("minProperties", "maxProperties", "properties"),
        ]:
            if low in stated or high in stated:
                found.append((field, kind, stated.get(low), stated.get(high)))
    return found


def _valued(kind: str, size: int) -> object:
    """A value of ``size`` for a limit of ``kind``: the number, or so many characters,
    arguments or variables."""
    if kind == "number":
        return size
    if kind == "length":  # of a path, for workdir's pattern; the others take any text
        return ("/" + "a" * (size - 1)) if size else ""
    if kind == "items":
        return ["x"] * size
    return {f"V{i}": "1" for i in range(size)}


def test_the_schema_states_limits() -> None:
    stated = {field for field, *_ in _stated_limits()}
    assert {"gpus", "workers", "min_runtime_ns", "grace_ns", "name", "command", "env"} <= stated


@pytest.mark.parametrize(("field", "kind", "low", "high"), _stated_limits())
def test_every_limit_the_schema_states_is_the_one_validation_holds_to(
    field: str, kind: str, low: int | None, high: int | None
) -> None:
    named = field.removesuffix("_ns")  # validation names durations as files write them

    def refused(size: int) -> bool:
        spec = msgspec.structs.replace(b.spec(), **{field: _valued(kind, size)})
        return any(e.field.split(".")[0] == named for e in spec_problems(spec))

    if low is not None:
        assert not refused(low)
        assert refused(low - 1)
    if high is not None:
        assert not refused(high)
        assert refused(high + 1)


@pytest.mark.parametrize("trailing", ["\n", "\r\n"])
def test_a_name_with_a_trailing_line_break_is_no_name(trailing: str) -> None:
    """Python's ``$`` matches before a final newline; the JSON Schema's does not, and a
    subject with a newline in it cannot be published (an account's usage could never be
    charged)."""
    assert [f for f, _ in problems(account="ml/vision" + trailing)] == ["account"]
    assert [f for f, _ in problems(env={"MODE" + trailing: "1"})] == ["env"]
    assert not is_principal("alice" + trailing)
    assert not is_id("node-1" + trailing)


def test_durations_in_refusals_are_written_as_durations() -> None:
    """Not `min_runtime='32400000000000'`: the value as a user would have written it."""
    hours_9 = 9 * 3600 * 10**9
    spec = JobSpec(account="ml/vision", gpus=1, command=["true"], min_runtime_ns=hours_9)
    refused = validate_submission(SubmitRequest(spec=spec), State())
    assert [(e.field, e.value) for e in refused] == [("min_runtime", "9h")]
    spec = JobSpec(account="ml/vision", gpus=1, command=["true"], grace_ns=2 * hours_9)
    refused = validate_submission(SubmitRequest(spec=spec), State())
    assert [(e.field, e.value) for e in refused] == [("grace", "18h")]
    spec = JobSpec(account="ml/vision", gpus=1, command=["true"], max_runtime_ns=-5 * 10**9)
    refused = validate_submission(SubmitRequest(spec=spec), State())
    assert [(e.field, e.value) for e in refused] == [("max_runtime", "-5s")]


def test_what_the_cluster_allows_follows_its_nodes_as_they_change() -> None:
    """Validation keeps what the nodes allow between submissions; a node that joins,
    grows, shrinks or brings a new GPU model changes the answer at once."""
    state = apply(State(), 1, b.node("n1", 8))
    assert [f for f, _ in problems(state, gpus=16)] == ["gpus"]
    assert [f for f, _ in problems(state, flavor="H100")] == ["flavor"]
    assert [f for f, _ in problems(state, gpus=4, workers=3, topology="rack")] == ["workers"]
    state = apply(state, 2, b.node("n1", 16))  # the same node, registered again, larger
    assert problems(state, gpus=16) == []
    state = apply(state, 3, b.node("n2", 8, model="H100"))
    assert problems(state, flavor="H100") == []
    assert problems(state, gpus=4, workers=3, topology="rack") == []
    state = apply(state, 4, b.node("n1", 2))  # and smaller again
    assert [f for f, _ in problems(state, gpus=16)] == ["gpus"]
    assert [f for f, _ in problems(state, gpus=4, workers=3, topology="rack")] == ["workers"]


def test_what_the_cluster_allows_follows_a_refold_into_the_same_state() -> None:
    """A refold hands its result to the state's holders (``become``): the nodes may differ
    while their version happens to be the same."""
    state, refolded = apply(State(), 1, b.node("n1", 8)), apply(State(), 1, b.node("n1", 16))
    assert state.nodes_version == refolded.nodes_version
    assert [f for f, _ in problems(state, gpus=16)] == ["gpus"]
    state.become(refolded)
    assert problems(state, gpus=16) == []
