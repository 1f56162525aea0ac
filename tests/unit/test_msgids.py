"""Each message-id scheme, pinned to the literal ids logs already hold: the stream dedupes
a new writer's appends against an old writer's only while the ids are the same."""

import pytest

from allot.proto import msgids
from allot.proto.events import AccountsApplied, AccountSettings, Meta


@pytest.mark.parametrize(
    ("made", "pinned"),
    [
        (msgids.submission("j-1"), "submit:j-1"),
        (msgids.cancellation("j-1"), "cancel:j-1"),
        (msgids.policy_adoption("0123456789abcdef"), "policy:0123456789abcdef"),
        (msgids.attempt_step("j-1", 0, "stop"), "j-1:0:stop"),
        (msgids.attempt_step("j-1", 2, "kill"), "j-1:2:kill"),
        (msgids.attempt_step("j-1", 2, "requeued"), "j-1:2:requeued"),
        (msgids.attempt_step("j-1", 2, "grace-too-short"), "j-1:2:grace-too-short"),
        (msgids.attempt_step("j-1", 2, "preempted"), "j-1:2:preempted"),
        (msgids.attempt_step("j-1", 3, "max-wait"), "j-1:3:max-wait"),
        (msgids.node_drained("node-1", 4), "node-1:drain:4"),
        (msgids.node_report("j-1", 1, "node-1", "started"), "j-1:1:node-1:started"),
        (msgids.node_report("j-1", 1, "node-1", "exited"), "j-1:1:node-1:exited"),
        (msgids.node_report("j-1", 0, "node-1", "cancelled"), "j-1:0:node-1:cancelled"),
        (msgids.checkpoint("j-1", 3), "j-1:checkpoint:3"),
        (msgids.health_change("node-1", None, False, 5), "health:node-1:node:down:5"),
        (msgids.health_change("node-1", 0, True, 6), "health:node-1:0:up:6"),
        (msgids.health_change("node-1", 7, False, 0), "health:node-1:7:down:0"),
        (msgids.suspect_drain("node-1", 2), "suspect:node-1:2"),
        (msgids.node_loss("node-1", 1700000000123456789), "lost:node-1:1700000000123456789"),
        (msgids.usage_charge("j-1", 1, 10, 20), "usage:j-1:1:10:20"),
        (msgids.budget_exhausted("lab/a", 1000, 2), "exhausted:lab/a:1000:2"),
        (msgids.quarantine(42), "quarantine:42"),
    ],
)
def test_a_scheme_makes_the_ids_the_log_holds(made: str, pinned: str) -> None:
    assert made == pinned


def test_an_accounts_apply_is_named_by_its_changes_and_basis_only() -> None:
    changes = AccountsApplied(
        meta=Meta(id="x", at=1, producer="ledger"),
        defined={"lab": AccountSettings(weight=2, quota={"gpu": 8})},
        updated={"lab/a": AccountSettings(members=["alice"])},
        removed=["old"],
        basis_seq=41,
        by="op",
    )
    assert msgids.accounts_apply(changes) == "accounts:bafa5305c6e8316259a17601"
    same_elsewhere = AccountsApplied(
        meta=Meta(id="y", at=9, producer="other"),
        defined=changes.defined,
        updated=changes.updated,
        removed=changes.removed,
        basis_seq=41,
        by="someone else",
    )
    assert msgids.accounts_apply(same_elsewhere) == msgids.accounts_apply(changes)
    nothing = AccountsApplied(meta=Meta(id="y", at=9, producer="other"))
    assert msgids.accounts_apply(nothing) == "accounts:b5831387a83d3b6e50df455d"
