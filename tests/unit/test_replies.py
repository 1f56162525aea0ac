import msgspec

from allot.proto.commands import AccountsApplyReply, CancelReply, FieldError
from allot.services.replies import MAX_ERRORS, bounded


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
