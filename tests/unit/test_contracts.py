import ast
import inspect
import typing
from pathlib import Path
from types import ModuleType

import msgspec
import pytest

import allot.proto
from allot.bus.codec import decode, encode
from allot.bus.permissions import ANSWERS
from allot.proto import commands, events, output, queries, schema, telemetry
from allot.proto.events import (
    EVENT_BY_TAG,
    EVENT_TYPES,
    Admission,
    AnyEvent,
    ArrayTasks,
    Event,
    JobCancelRequested,
    JobSpec,
    JobSubmitted,
    Meta,
    Placement,
    PlanComputed,
)
from allot.proto.subjects import subject_for
from allot.services import asyncapi
from tests import builders as b

ROOT = Path(__file__).resolve().parents[2]


def one_of_each() -> list[Event]:
    """A valid instance of every event type, built from msgspec's own defaults."""
    events = []
    for event_type in EVENT_TYPES:
        sample = {
            "meta": msgspec.to_builtins(b.meta()),
            "type": event_type.__struct_config__.tag,
        }
        for field in msgspec.structs.fields(event_type):
            if field.name in sample or field.required is False:
                continue
            sample[field.name] = _sample_value(field.type)
        events.append(msgspec.convert(sample, event_type))
    return events


def _sample_value(tp: object) -> object:
    samples = {str: "x1", int: 7, bool: True}
    if tp in samples:
        return samples[tp]
    if typing.get_origin(tp) is typing.Annotated:
        return _sample_value(typing.get_args(tp)[0])
    if tp == list[events.Submission]:  # a batch holds at least one
        submitted = {"type": "JobSubmitted", "job_id": "j-1", "spec": _sample_value(JobSpec)}
        return [{"event": {"meta": msgspec.to_builtins(b.meta()), **submitted}}]
    if getattr(tp, "__origin__", None) is list:
        return []
    args = getattr(tp, "__args__", ())
    if type(None) in args:  # Optional
        return None
    if tp is JobSpec:
        return msgspec.to_builtins(b.spec())
    if tp is ArrayTasks:
        return {"indices": [[0, 9, 1]], "max_running": 2}
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        return msgspec.to_builtins(tp())  # a struct whose fields all have defaults
    raise AssertionError(f"no sample for {tp}")


@pytest.mark.parametrize("event", one_of_each(), ids=lambda e: type(e).__name__)
def test_every_event_round_trips_through_the_codec(event: Event) -> None:
    assert decode(encode(event)) == event
    assert subject_for(event).startswith("allot.evt.")


def test_the_decoder_knows_every_event_type() -> None:
    assert set(typing.get_args(AnyEvent)) == set(EVENT_TYPES)
    assert {kind: tag for tag, kind in EVENT_BY_TAG.items()} == {
        kind: kind.__struct_config__.tag for kind in EVENT_TYPES
    }


def _classes_in(module: ModuleType) -> dict[str, type]:
    return {
        name: value
        for name, value in vars(module).items()
        if inspect.isclass(value) and value.__module__ == module.__name__ and name[0] != "_"
    }


def test_every_event_class_is_in_the_union() -> None:
    """An event class that pins its tag (``JobEvent`` and the like are bases, which do not):
    defined in ``allot.proto.events`` but left out of ``AnyEvent``, it would be written by
    its service and refused by every reader."""
    concrete = {
        name
        for name, kind in _classes_in(events).items()
        if issubclass(kind, Event) and "tag=" in inspect.getsource(kind).split("\n", 1)[0]
    }
    assert concrete == {kind.__name__ for kind in EVENT_TYPES}


@pytest.mark.parametrize("module", [events, commands, queries, output, telemetry])
def test_every_message_type_is_exported_from_the_package(module: ModuleType) -> None:
    structs = {n for n, kind in _classes_in(module).items() if issubclass(kind, msgspec.Struct)}
    missing = structs - set(allot.proto.__all__)
    assert missing == set(), f"add {sorted(missing)} to allot.proto.__all__"
    for name in allot.proto.__all__:
        assert getattr(allot.proto, name) is not None


def test_tags_are_pinned_and_unique() -> None:
    tags = [t.__struct_config__.tag for t in EVENT_TYPES]
    assert tags == [t.__name__ for t in EVENT_TYPES]
    assert len(set(tags)) == len(tags)


def test_fields_from_a_newer_schema_are_tolerated() -> None:
    data = msgspec.json.decode(encode(b.submitted("j1")))
    data["priority_class"] = "gold"
    data["spec"]["topology"] = "rack"
    event = decode(msgspec.json.encode(data))
    assert isinstance(event, JobSubmitted)
    assert event.job_id == "j1"


def test_an_unknown_event_type_is_a_decode_error() -> None:
    with pytest.raises(msgspec.ValidationError):
        decode(b'{"type": "JobTeleported", "meta": {"id": "1", "at": 1, "producer": "x"}}')


def test_an_event_from_a_newer_writer_with_a_spec_field_this_reader_lacks_is_read() -> None:
    """A reader older than the intake that wrote the event keeps the job (rolling upgrades,
    logs imported from newer installations); only requests refuse fields they lack."""
    event = msgspec.to_builtins(b.submitted("j-1"))
    event["spec"]["preemptible"] = True  # a field of a later version
    decoded = decode(msgspec.json.encode(event))
    assert isinstance(decoded, JobSubmitted)
    assert decoded.spec == b.submitted("j-1").spec


def test_subjects_follow_the_entity() -> None:
    assert subject_for(b.submitted("j-1")) == "allot.evt.job.j-1.JobSubmitted"
    assert subject_for(b.node("node-1")) == "allot.evt.node.node-1.NodeRegistered"
    assert subject_for(b.plan()) == "allot.evt.plan.PlanComputed"
    with pytest.raises(ValueError, match="subject token"):
        subject_for(b.submitted("a.b"))


def test_checked_in_schemas_are_current() -> None:
    stale = [
        name
        for name, text in schema.render().items()
        if (schema.SCHEMA_DIR / name).read_text() != text
    ]
    assert stale == [], f"run `python -m allot.proto.schema` to refresh {stale}"


FORBIDDEN = {
    "asyncio",
    "nats",
    "faststream",
    "time",
    "uuid",
    "random",
    "allot.bus",
    "allot.services",
    "allot.client",
}


def imports_of(path: Path) -> set[str]:
    return imports_of_source(path.read_text())


def imports_of_source(source: str) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            # `from allot import bus` imports allot.bus.
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_the_purity_check_sees_every_import_form() -> None:
    source = "from allot import bus\nimport time as clock\nfrom allot.services.node import app\n"
    names = imports_of_source(source)
    assert {"allot.bus", "time", "allot.services.node"} <= names


@pytest.mark.parametrize("package", ["libs/core", "proto"])
def test_the_core_and_the_contracts_stay_pure(package: str) -> None:
    files = sorted((ROOT / package).glob("*.py"))
    assert files
    for path in files:
        for name in imports_of(path):
            hit = [f for f in FORBIDDEN if name == f or name.startswith(f + ".")]
            assert not hit, f"{path.relative_to(ROOT)} imports {name}"


def test_a_version_1_plan_is_upcast_to_placements_and_newer_fields_are_ignored() -> None:
    old = (
        b'{"type":"PlanComputed","meta":{"id":"e1","at":5,"producer":"planner","v":1},'
        b'"basis_seq":3,"now":5,"policy":"p","policy_hash":"h","code_version":"c",'
        b'"admissions":[{"job_id":"j","node_id":"n1","gpus":[0,1],"funded":true}]}'
    )
    upcast = decode(old)
    assert isinstance(upcast, PlanComputed)
    assert upcast.admissions == [
        Admission(job_id="j", placements=[Placement(node_id="n1", gpus=[0, 1])], funded=True)
    ]
    newer = (
        b'{"type":"JobCancelRequested","meta":{"id":"e2","at":5,"producer":"x","v":9},'
        b'"job_id":"j","reason":"r","asked_by":"someone"}'
    )
    assert decode(newer) == JobCancelRequested(
        meta=Meta(id="e2", at=5, producer="x", v=9), job_id="j", reason="r"
    )
    with pytest.raises(msgspec.ValidationError):
        decode(old.replace(b'"v":1', b'"v":2'))  # current version, old shape: no upcast


def test_the_checked_in_asyncapi_document_is_current() -> None:
    assert asyncapi.DOCUMENT.read_text() == asyncapi.render(), (
        "run `python -m allot.services.asyncapi` to refresh proto/asyncapi.json"
    )


def test_the_asyncapi_document_lists_every_command_a_service_answers_and_resolves() -> None:
    doc = asyncapi.document()
    answered = {name for names in ANSWERS.values() for name in names}
    assert set(doc["channels"]) == answered
    for name, channel in doc["channels"].items():
        assert channel["address"] == f"allot.cmd.{{principal}}.{name}"

    def refs(node: object) -> list[str]:
        if isinstance(node, dict):
            own = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
            return own + [r for value in node.values() for r in refs(value)]
        return [r for value in node for r in refs(value)] if isinstance(node, list) else []

    for ref in refs(doc):  # every reference points at something in the document
        target: object = doc
        for step in ref.removeprefix("#/").split("/"):
            assert isinstance(target, dict), ref
            assert step in target, ref
            target = target[step]
    submit = doc["components"]["schemas"]["JobSpec"]
    assert submit["additionalProperties"] is False
    assert submit["properties"]["gpus"]["minimum"] == 1
