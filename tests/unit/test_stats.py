"""The counts services send outside the log, and what the metrics service takes of them:
only names it knows, with their labels, as finite numbers, and not too many."""

import math

import msgspec
import pytest

from allot.proto.commands import SubmitRequest
from allot.services.commands import refused_field
from allot.services.metrics.app import counted_families, taken_stats
from allot.services.stats import CONFLICTS, CYCLES, REQUESTS, Counts, Sample, Stats


def sent(counts: Counts) -> bytes:
    return msgspec.json.encode(counts.message())


def test_a_planners_counts_are_taken_and_summed_over_its_instances() -> None:
    first, second = Counts("planner"), Counts("planner")
    for counts, cycles in ((first, [0.002, 0.3]), (second, [7.0])):
        for seconds in cycles:
            counts.observe_cycle(seconds)
            counts.add(CYCLES, decided="true")
    first.add(CONFLICTS)
    taken = [taken_stats(sent(counts)) for counts in (first, second)]
    assert all(stats is not None for stats in taken)
    families = {f.name: f for f in counted_families([s.samples for s in taken if s])}
    [cycles] = families["allot_plan_cycles"].samples
    assert (cycles.labels, cycles.value) == ({"decided": "true"}, 3)
    histogram = {
        s.name + s.labels.get("le", ""): s.value
        for s in families["allot_plan_cycle_seconds"].samples
    }
    assert histogram["allot_plan_cycle_seconds_bucket0.005"] == 1
    assert histogram["allot_plan_cycle_seconds_bucket0.5"] == 2
    assert histogram["allot_plan_cycle_seconds_bucket5.0"] == 2
    assert histogram["allot_plan_cycle_seconds_bucket+Inf"] == 3
    assert histogram["allot_plan_cycle_seconds_count"] == 3
    assert math.isclose(histogram["allot_plan_cycle_seconds_sum"], 7.302)


@pytest.mark.parametrize(
    "sample",
    [
        Sample(name="allot_made_up_total", value=1),  # a name it does not know
        Sample(name=REQUESTS, labels={"tenant": "x"}, value=1),  # a label it does not have
        Sample(name=REQUESTS, labels={"command": "x" * 65}, value=1),  # a label too long
        Sample(name=CYCLES, value=-1),
        Sample(name=CYCLES, value=math.inf),
        Sample(name=CYCLES, value=math.nan),
    ],
)
def test_counts_it_does_not_know_are_not_taken(sample: Sample) -> None:
    stats = Stats(service="planner", instance="x", samples=[sample])
    assert taken_stats(msgspec.json.encode(stats)) is None


def test_too_many_counts_or_no_counts_at_all_are_not_taken() -> None:
    many = Stats(service="intake", instance="x", samples=[Sample(name=CONFLICTS, value=1)] * 1001)
    assert taken_stats(msgspec.json.encode(many)) is None
    assert taken_stats(b"not json") is None
    assert taken_stats(b'{"service": "intake"}') is None
    assert taken_stats(b"[" * 300_000) is None


@pytest.mark.parametrize(
    ("field", "label"),
    [("spec.gpus", "gpus"), ("gpus", "gpus"), ("request", "request"), ("gpu_count", "other"),
     ("spec.env.SECRET", "env"), ("spec[0]", "spec"), ("", "other")],
)  # fmt: skip
def test_a_refusal_is_counted_by_a_field_of_the_contract_only(field: str, label: str) -> None:
    """The field a refusal names may be the sender's own misspelling: labels must come
    from a small set."""
    assert refused_field(field, SubmitRequest) == label
