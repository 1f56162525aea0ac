"""Per-type event versions (docs/adr/0028): what logs hold today reads as it did, older
versions are upcast every time they are read, and new events are written as before."""

from pathlib import Path
from typing import Any

import msgspec
import pytest

from allot.bus import codec
from allot.bus.codec import decode, encode
from allot.proto.events import (
    BASE_VERSION,
    EVENT_BY_TAG,
    EVENT_TYPES,
    Admission,
    Event,
    Meta,
    Placement,
    PlanComputed,
    UsageCharged,
)
from allot.proto.upcasters import UPCASTERS, Upcaster
from tests import builders as b

# One event of every type, and a few with every field set, as the code before per-type
# versions wrote them (meta.v 2): the bytes existing logs hold.
WRITTEN_AT_2 = (Path(__file__).parent / "data" / "every-event-v2.jsonl").read_bytes().splitlines()


def _kind(line: bytes) -> type[Event]:
    return EVENT_BY_TAG[msgspec.json.decode(line)["type"]]


def test_the_checked_in_events_cover_every_type() -> None:
    assert {_kind(line) for line in WRITTEN_AT_2} == set(EVENT_TYPES)


@pytest.mark.parametrize("line", WRITTEN_AT_2, ids=lambda line: _kind(line).__name__)
def test_an_event_written_at_version_2_reads_as_it_did_and_is_written_the_same(
    line: bytes,
) -> None:
    event = decode(line)
    assert event == msgspec.json.decode(line, type=_kind(line))  # no upcaster touched it
    assert encode(event) == line


@pytest.mark.parametrize("line", WRITTEN_AT_2, ids=lambda line: _kind(line).__name__)
def test_an_event_written_at_version_1_reads_as_its_version_2(line: bytes) -> None:
    """Version 1 differed from 2 only in PlanComputed's admissions; a plan of version 1
    with placements already (which readers before per-type versions accepted) reads too."""
    at_1 = decode(line.replace(b'"v":2}', b'"v":1}', 1))
    at_2 = decode(line)
    assert at_1 == msgspec.structs.replace(at_2, meta=msgspec.structs.replace(at_2.meta, v=1))


def test_a_version_1_plan_gets_placements_and_is_written_back_at_version_2() -> None:
    old = (
        b'{"type":"PlanComputed","meta":{"id":"e1","at":5,"producer":"planner","v":1},'
        b'"basis_seq":3,"now":5,"policy":"p","policy_hash":"h","code_version":"c",'
        b'"admissions":[{"job_id":"a","node_id":"n1","gpus":[0,1]},'
        b'{"job_id":"b","node_id":"n2","gpus":[3],"funded":true}]}'
    )
    plan = decode(old)
    assert isinstance(plan, PlanComputed)
    assert plan.meta.v == 1  # what it was written at
    assert plan.admissions == [
        Admission(job_id="a", placements=[Placement(node_id="n1", gpus=[0, 1])]),
        Admission(job_id="b", placements=[Placement(node_id="n2", gpus=[3])], funded=True),
    ]
    rewritten = encode(plan)
    assert b'"v":2' in rewritten  # the fields written are version 2's
    assert decode(rewritten) == msgspec.structs.replace(
        plan, meta=msgspec.structs.replace(plan.meta, v=2)
    )


def test_a_plan_an_upcaster_cannot_read_is_a_validation_error_naming_it() -> None:
    broken = (
        b'{"type":"PlanComputed","meta":{"id":"e1","at":5,"producer":"planner","v":1},'
        b'"basis_seq":3,"now":5,"policy":"p","policy_hash":"h","code_version":"c",'
        b'"admissions":[{"job_id":"a","gpus":[0]}]}'
    )
    with pytest.raises(msgspec.ValidationError, match="PlanComputed from version 1"):
        decode(broken)


@pytest.mark.parametrize("v", [0, -1])
def test_a_version_below_1_of_an_upcast_type_is_refused(v: int) -> None:
    plan = msgspec.to_builtins(b.plan())
    plan["meta"]["v"] = v
    with pytest.raises(msgspec.ValidationError, match="versions start at 1"):
        decode(msgspec.json.encode(plan))


def test_every_upcaster_names_a_type_and_a_version_below_its_current_one() -> None:
    for tag, step in UPCASTERS:
        assert tag in EVENT_BY_TAG
        assert 1 <= step < EVENT_BY_TAG[tag].VERSION
    assert all(kind.VERSION >= BASE_VERSION for kind in EVENT_TYPES)


def test_new_events_are_written_at_version_2_as_before() -> None:
    charge = UsageCharged(
        meta=Meta(id="e1", at=5, producer="p"), path="lab", job_id="j", attempt=0,
        from_ns=0, to_ns=1, gpu_ms=1,
    )  # fmt: skip
    assert b'"meta":{"id":"e1","at":5,"producer":"p","v":2}' in encode(charge)


@pytest.fixture
def usage_in_micro_gpu_ms(monkeypatch: pytest.MonkeyPatch) -> None:
    """A version 3 of UsageCharged that changes what ``gpu_ms`` means, not its shape: an
    event of version 2 decodes without complaint, and only its version says it is old."""

    def to_micro(event: dict[str, Any]) -> dict[str, Any]:
        return {**event, "gpu_ms": event["gpu_ms"] * 1000}

    upcasters: dict[tuple[str, int], Upcaster] = {**UPCASTERS, ("UsageCharged", 2): to_micro}
    monkeypatch.setattr(UsageCharged, "VERSION", 3)
    monkeypatch.setattr(codec, "UPCASTERS", upcasters)
    monkeypatch.setattr(codec, "_UPCAST_BELOW", codec.upcast_floors(upcasters))
    monkeypatch.setattr(codec, "_UPCASTABLE", frozenset(codec._UPCAST_BELOW))


def _charge(v: int, gpu_ms: int) -> bytes:
    return (
        b'{"type":"UsageCharged","meta":{"id":"e","at":5,"producer":"ledger","v":%d},'
        b'"path":"lab","job_id":"j","attempt":0,"from_ns":0,"to_ns":1,"gpu_ms":%d}' % (v, gpu_ms)
    )


@pytest.mark.usefixtures("usage_in_micro_gpu_ms")
def test_an_upcaster_runs_on_every_older_event_even_one_whose_shape_still_decodes() -> None:
    for v in (1, 2):  # 1 to 2 has no step for this type; 2 to 3 does
        old = decode(_charge(v, 7))
        assert isinstance(old, UsageCharged)
        assert (old.gpu_ms, old.meta.v) == (7000, v)
    current = decode(_charge(3, 7))
    assert isinstance(current, UsageCharged)
    assert current.gpu_ms == 7
    newer = decode(_charge(4, 7))  # from a newer writer: read as it is
    assert isinstance(newer, UsageCharged)
    assert newer.gpu_ms == 7


@pytest.mark.usefixtures("usage_in_micro_gpu_ms")
def test_an_event_is_written_at_its_types_version_whatever_its_meta_says() -> None:
    fresh = UsageCharged(
        meta=b.meta(), path="lab", job_id="j", attempt=0, from_ns=0, to_ns=1, gpu_ms=7
    )
    written = encode(fresh)
    assert msgspec.json.decode(written)["meta"]["v"] == 3
    read = decode(written)
    assert isinstance(read, UsageCharged)
    assert read.gpu_ms == 7  # not upcast again
