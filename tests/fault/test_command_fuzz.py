"""Hostile requests on every command subject of a running stack: each gets one reply, no
service stops, a refused request appends nothing, and no reply echoes a huge value back."""

import asyncio
import json
from collections import Counter

from allot.client import AsyncClient
from allot.client.stack import Stack
from allot.proto.subjects import ACCOUNTS_APPLY, BUDGET_GRANT, CANCEL, NODE_COMMAND, SUBMIT
from tests.fault.test_hostile_input import alive
from tests.fuzz import Fuzzer

PER_SUBJECT = 300
LARGEST_REPLY = 4096  # bytes: an error names a value; it need not repeat 100 kB of it
SPEC = {"account": "lab/a", "gpus": 1, "command": ["true"], "name": "fuzzed"}
REQUESTS = {
    SUBMIT: [{"spec": SPEC, "idempotency_key": "k1"}, {"spec": {**SPEC, "workers": 2}}],
    CANCEL: [{"job_id": "j-0000000000000000", "reason": "fuzz"}],
    NODE_COMMAND: [
        {"node_id": "node-2", "action": "cordon", "drain": False, "reason": "fuzz"},
        {"node_id": "node-2", "action": "uncordon"},
    ],
    ACCOUNTS_APPLY: [{"accounts": {"lab": {"weight": 2}, "lab/a": {"quota": {"gpu": 4}}}}],
    BUDGET_GRANT: [{"account": "lab/a", "period": "7d", "gpu_hours": 10.0}],
}
# What an accepted command of each subject appends, one event each.
APPENDS = {
    SUBMIT: {"JobSubmitted"},
    CANCEL: {"JobCancelRequested"},
    NODE_COMMAND: {"NodeCordoned", "NodeUncordoned"},
    ACCOUNTS_APPLY: {"AccountsApplied"},
    BUDGET_GRANT: {"BudgetGranted"},
}


async def test_every_hostile_request_is_answered_and_refusals_append_nothing(
    stack: Stack, client: AsyncClient
) -> None:
    everyone = alive(stack)
    fuzzer = Fuzzer(seed=11)
    figures: dict[str, Counter[str]] = {}
    start = await client.events.last_seq()
    for subject, bases in REQUESTS.items():
        counts = figures[subject] = Counter()
        for payload in fuzzer.variants(bases, PER_SUBJECT):
            counts["sent"] += 1
            try:
                msg = await client.events.nc.request(client.subject(subject), payload, timeout=10)
            except TimeoutError:
                counts["unanswered"] += 1
                continue
            reply = json.loads(msg.data)
            counts["replies"] += 1
            counts["largest reply"] = max(counts["largest reply"], len(msg.data))
            if reply.get("errors"):
                counts["refused"] += 1
            elif reply.get("duplicate"):
                counts["duplicate"] += 1
            else:
                counts["accepted"] += 1
    await asyncio.sleep(1)  # the last appends' acknowledgements are in; let folds settle
    appended = Counter(
        r.type for r in await client.events.read(start + 1) if r.subject.startswith("allot.evt.")
    )
    for subject, counts in figures.items():
        counts["appended"] = sum(appended[kind] for kind in APPENDS[subject])
        print(subject, dict(counts))
        assert counts["replies"] == counts["sent"] == PER_SUBJECT
        assert counts["largest reply"] <= LARGEST_REPLY
        assert counts["refused"] > 0
        # An accepted apply of the tree it already has appends nothing: at most one each.
        assert counts["appended"] <= counts["accepted"]
        if subject != ACCOUNTS_APPLY:
            assert counts["appended"] == counts["accepted"]
    assert alive(stack) == everyone
