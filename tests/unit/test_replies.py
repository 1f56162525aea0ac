import logging

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from nats.aio.msg import Msg

from allot.proto.commands import AccountsApplyReply, CancelReply, FieldError, SubmitRequest
from allot.services import replies
from allot.services.replies import MAX_ERRORS, bounded, decode_request, request_of


def test_a_reply_repeats_no_huge_value_back() -> None:
    huge = "x" * 100_000
    reply = bounded(
        CancelReply(job_id=huge, errors=[FieldError(field=huge, value=huge, message=huge)])
    )
    assert len(msgspec.json.encode(reply)) < 2_000
    assert reply.job_id == "x" * 200 + "… (100000 characters)"
    assert reply.errors[0].value == reply.job_id


def test_a_reply_lists_the_first_errors_and_says_how_many_more() -> None:
    errors = [FieldError(field=f"accounts.t{i}", value="", message="no") for i in range(5_000)]
    reply = bounded(AccountsApplyReply(errors=errors))
    assert reply.errors[:MAX_ERRORS] == errors[:MAX_ERRORS]
    assert reply.errors[MAX_ERRORS] == FieldError(
        field="errors",
        value="5000 errors",
        message=f"{5_000 - MAX_ERRORS} more not shown: correct these and send it again",
    )
    assert len(reply.errors) == MAX_ERRORS + 1


def test_a_short_reply_is_sent_as_it_is() -> None:
    reply = CancelReply(job_id="j-1", seq=4, errors=[])
    assert bounded(reply) == reply


@pytest.mark.parametrize(
    "payload",
    [
        b'{"spec": {"account": "a", "gpus": "x", "command": ["\\ud800"]}}',  # a lone surrogate
        b'{"spec": {"account": "a", "gpus": "x", "command": ["x"], "cpus": 1e999}}',
        b'{"spec": 1, "idempotency_key": "\\udfff"}',
    ],
)
def test_a_request_that_fails_twice_over_is_still_a_field_error(payload: bytes) -> None:
    """The value a bad field got is looked up by decoding again, untyped; a request that
    the untyped decoder refuses too is answered all the same, and nothing raises."""
    problem = decode_request(payload, SubmitRequest)
    assert isinstance(problem, FieldError)
    assert problem.message


@given(st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_decoding_any_request_answers_or_refuses_and_never_raises(payload: bytes) -> None:
    decoded = decode_request(b'{"spec": ' + payload + b"}", SubmitRequest)
    assert isinstance(decoded, SubmitRequest | FieldError)


def test_a_request_nested_too_deep_is_refused_before_any_decoding() -> None:
    problem = decode_request(b'{"spec": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", SubmitRequest)
    assert isinstance(problem, FieldError)
    assert "nested deeper" in problem.message


def test_a_flood_of_messages_that_are_no_requests_is_logged_as_a_count(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user can have JetStream answer onto a command subject hundreds of times a request."""
    monkeypatch.setattr(replies, "_dropped", replies._Dropped())  # none dropped before
    stray = Msg(_client=None, subject="allot.cmd.alice.cancel", reply="", data=b"{}")  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="allot.commands"):
        assert [request_of(stray) for _ in range(500)] == [None] * 500
    [line] = [r.getMessage() for r in caplog.records]
    assert line.startswith("dropped 1 message(s), the last on allot.cmd.alice.cancel")
