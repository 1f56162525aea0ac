"""Requests for a job's output: who asks, by the subject, and what a request may hold."""

import msgspec
import pytest

from allot.proto.output import MAX_OUTPUT_BYTES, OutputReply, OutputRequest
from allot.proto.subjects import output_asker, output_request
from allot.services.replies import decode_request


def test_the_subject_names_the_asker_and_whether_an_operator_asks() -> None:
    assert output_request("node-1", "alice", False) == "allot.output.node-1.alice"
    assert output_request("node-1", "root", True) == "allot.output.node-1.root.admin"
    assert output_asker("allot.output.node-1.alice", "node-1") == ("alice", False)
    assert output_asker("allot.output.node-1.root.admin", "node-1") == ("root", True)
    for other in (
        "allot.output.node-2.alice",  # another node's
        "allot.output.node-1x.alice",
        "allot.output.node-1.alice.sudo",
        "allot.output.node-1.alice.admin.x",
        "allot.output.node-1.",
        "allot.cmd.alice.submit",
    ):
        assert output_asker(other, "node-1") is None, other
    with pytest.raises(ValueError, match="subject token"):
        output_request("node-1", "a.b", False)


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        (b'{"job_id": "j", "offset": -1}', "offset"),
        (b'{"job_id": "j", "max_bytes": 0}', "max_bytes"),
        (b'{"job_id": "j", "max_bytes": %d}' % (MAX_OUTPUT_BYTES + 1), "max_bytes"),
        (b'{"job_id": "j", "attempt": -1}', "attempt"),
        (b'{"job_id": "j", "offset": 1e300}', "offset"),
        (b'{"job_id": "j", "rank": 1}', "rank"),
        (b"{}", "job_id"),
    ],
)
def test_a_request_out_of_bounds_names_its_field(payload: bytes, field: str) -> None:
    problem = decode_request(payload, OutputRequest)
    assert not isinstance(problem, OutputRequest)
    assert problem.field == field


def test_output_travels_as_bytes() -> None:
    raw = bytes(range(256))
    encoded = msgspec.json.encode(OutputReply(data=raw, next_offset=256, size=256))
    assert msgspec.json.decode(encoded, type=OutputReply).data == raw
