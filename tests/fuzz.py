"""Hostile messages for the log, from a seed: well-formed events of every type, then the
same mutated (wrong types, missing and unknown fields, huge and negative numbers, deep
nesting, unknown event types, references to jobs and nodes nobody knows, bytes that are
no JSON at all)."""

import copy
import json
import random
from collections.abc import Iterator
from typing import Any

import msgspec

from allot.proto.events import (
    AccountDefined,
    AccountSettings,
    BudgetExhausted,
    BudgetGranted,
    Event,
    EventQuarantined,
    GraceTooShort,
    Hold,
    JobCancelled,
    JobCancelRequested,
    JobCheckpointed,
    JobRejected,
    JobRequeued,
    KillRequested,
    MaxWaitExceeded,
    NodeCordoned,
    NodeDrained,
    NodeHealthChanged,
    NodeUncordoned,
    PendingReason,
    Placement,
    Preemption,
    StopRequested,
    UsageCharged,
)
from allot.proto.subjects import subject_for
from tests import builders as b

HOSTILE: list[Any] = [
    0, -1, 1, 7, 2**31, 2**53 + 1, 2**63 - 1, 2**63, -(2**63), 2**64, 10**30,
    1e308, -1e308, 0.5, float("nan"), "x", "", "\u0000", "ü" * 3, None, True, False,
    [], {}, [0, 0, 0], {"a": 1}, [[]], "x" * 100_000, ["true"], {"gpu": -5},
]  # fmt: skip
IDS = ["j0", "j1", "j2", "j-unknown", "", "n1", "n2", "n-unknown", "lab/a", "lab", "a.b"]


DEEP = "\u2063deep\u2063"  # stands for nesting too deep for json.dumps to write


def deep(depth: int) -> bytes:
    return b'{"k":[' * (depth // 2) + b"0" + b"]}" * (depth // 2)


class Fuzzer:
    """``messages(n)``: n pairs of (subject, bytes), the same for the same seed. Node ids
    start with ``prefix`` (so a live stack's own nodes are left alone)."""

    def __init__(self, seed: int, prefix: str = "n", plans: bool = True):
        self.rng = random.Random(seed)
        self.prefix = prefix
        self.plans = plans  # forged plans too (replay rightly finds them unjustified)
        self.seq = 0  # how many came before: what a quarantine may name

    def messages(self, count: int) -> Iterator[tuple[str, bytes]]:
        for _ in range(count):
            self.seq += 1
            event = self.rng.choice(self._valid())
            if not self.plans and subject_for(event).startswith("allot.evt.plan."):
                event = b.submitted(self.rng.choice(IDS[:4]) or "j3")
            subject = subject_for(event)
            roll = self.rng.random()
            if roll < 0.3:
                yield subject, msgspec.json.encode(event)
            elif roll < 0.95:
                yield subject, self._mutated(msgspec.to_builtins(event))
            else:
                yield subject, self._garbage()

    def variants(self, bases: list[dict[str, Any]], count: int) -> Iterator[bytes]:
        """``count`` messages made from ``bases`` (plain JSON objects) as events are."""
        for _ in range(count):
            roll = self.rng.random()
            base = copy.deepcopy(self.rng.choice(bases))
            if roll < 0.2:
                yield json.dumps(base).encode()
            elif roll < 0.95:
                yield self._mutated(base)
            else:
                yield self._garbage()

    def _node(self) -> str:
        return self.rng.choice([f"{self.prefix}1", f"{self.prefix}2", f"{self.prefix}-unknown"])

    def _job(self) -> str:
        return self.rng.choice(["j0", "j1", "j2", "j3", "j-unknown"])

    def _valid(self) -> list[Event]:
        """One event of each type, about the few jobs, nodes and accounts fuzzed."""
        r, job, node, m = self.rng, self._job(), self._node(), b.meta(at=10**9 * self.seq)
        gpus = sorted(r.sample(range(8), r.randint(1, 4)))
        placement = Placement(node_id=node, gpus=gpus)
        plan = b.plan(b.admission(job, (node, gpus)), basis_seq=max(0, self.seq - 1))
        plan = msgspec.structs.replace(
            plan,
            pending=[PendingReason(job_id=self._job(), code="QUOTA")],
            preemptions=[Preemption(job_id=self._job(), code="TIER")],
            holds=[Hold(job_id=self._job(), placements=[placement])],
        )
        settings = AccountSettings(weight=r.randint(1, 3), quota={"gpu": r.randint(0, 8)})
        path = r.choice(["lab", "lab/a", "lab/b"])
        return [
            b.node(node, r.choice([1, 4, 8]), model="SIM", rack="r1"),
            b.submitted(job, r.randint(1, 8), resumable=r.random() < 0.5),
            plan,
            b.started(job, node, gpus),
            b.exited(job, node, r.choice([0, 1, None])),
            b.preempted(job, r.randint(0, 10**6)),
            b.lost(node),
            JobRejected(meta=m, job_id=job, field="gpus", value="9", message="too many"),
            JobCancelRequested(meta=m, job_id=job),
            JobCancelled(meta=m, job_id=job, node_id=node),
            JobCheckpointed(meta=m, job_id=job, node_id=node, path="/c", step=r.randint(1, 5)),
            StopRequested(meta=m, job_id=job, grace_ns=10**9, reason="preempt"),
            KillRequested(meta=m, job_id=job, reason="grace over"),
            GraceTooShort(meta=m, job_id=job, grace_ns=10**9, measured_ns=2 * 10**9),
            JobRequeued(meta=m, job_id=job, reason="preempted"),
            MaxWaitExceeded(
                meta=m, job_id=job, account="lab/a", attempt=0, waited_ns=9, max_wait_ns=1
            ),
            NodeHealthChanged(meta=m, node_id=node, healthy=r.random() < 0.5, reason="xid"),
            NodeHealthChanged(
                meta=m,
                node_id=node,
                healthy=r.random() < 0.5,
                reason="XID 79",
                gpu=r.randint(0, 3),
                fault="xid",
            ),
            NodeCordoned(meta=m, node_id=node, drain=r.random() < 0.5),
            NodeUncordoned(meta=m, node_id=node),
            NodeDrained(meta=m, node_id=node),
            AccountDefined(meta=m, path=path, settings=settings),
            BudgetGranted(
                meta=m, path=path, gpu_ms=r.randint(0, 10**9), period_ns=10**12, starts_at=0
            ),
            BudgetExhausted(meta=m, path=path, period=0, used_gpu_ms=1, budget_gpu_ms=1),
            UsageCharged(
                meta=m, path="lab/a", job_id=job, attempt=0, from_ns=0, to_ns=10**9, gpu_ms=1000
            ),
            EventQuarantined(meta=m, seq=r.randint(1, max(1, self.seq - 1)), reason="fuzz")
            if r.random() < 0.01
            else JobCancelRequested(meta=m, job_id=job),
        ]

    def _mutated(self, event: dict[str, Any]) -> bytes:
        r = self.rng
        for _ in range(r.randint(1, 3)):
            target, key = self._somewhere(event)
            kind = r.random()
            if kind < 0.35:  # decodable, and as hostile as its type allows
                target[key] = self._same_type(target[key])
            elif kind < 0.45:
                target[key] = copy.deepcopy(r.choice(HOSTILE))
            elif kind < 0.6 and isinstance(target, dict):
                target.pop(key, None)
            elif kind < 0.7 and isinstance(target, dict):
                target[f"unknown_{r.randint(0, 9)}"] = copy.deepcopy(r.choice(HOSTILE))
            elif kind < 0.8:
                target[key] = f"{DEEP}{r.choice([6, 30, 34, 200, 3000])}{DEEP}"
            elif kind < 0.92:
                target[key] = r.choice(IDS)
            else:
                event["type"] = r.choice(["JobSubmitted", "PlanComputed", "Nope", "", 7])
        text = json.dumps(event).encode()
        parts = text.split(json.dumps(DEEP)[1:-1].encode())
        for n in range(1, len(parts), 2):  # between a pair of markers: a depth
            parts[n] = deep(int(parts[n]))
            parts[n - 1], parts[n + 1] = parts[n - 1][:-1], parts[n + 1][1:]  # the quotes
        return b"".join(parts)

    def _same_type(self, value: Any) -> Any:
        r = self.rng
        if isinstance(value, bool):
            return not value
        if isinstance(value, int):
            return r.choice([0, -1, 1, value + 1, value - 1, 2**63 - 1, -(2**63), 2**31])
        if isinstance(value, str):
            return r.choice([*IDS, "", "x" * 10_000, value + value])
        if isinstance(value, list):
            return r.choice([[], value + value, value[:1] * 3, value[::-1]])
        if isinstance(value, dict):
            return r.choice([{}, {k: self._same_type(v) for k, v in value.items()}])
        return value

    def _somewhere(self, event: dict[str, Any]) -> tuple[Any, Any]:
        """A place in the event, any of them alike: a container and a key or index."""
        places: list[tuple[Any, Any]] = []
        containers: list[Any] = [event]
        while containers:
            container = containers.pop()
            keys = list(container) if isinstance(container, dict) else range(len(container))
            for key in keys:
                places.append((container, key))
                if isinstance(container[key], dict | list):
                    containers.append(container[key])
        if not places:
            event["unknown"] = None
            return event, "unknown"
        return self.rng.choice(places)

    def _garbage(self) -> bytes:
        return self.rng.choice(
            [b"", b"{", b"null", b"[]", b"\xff\xfe", b'{"type":"JobSubmitted"}', b"[" * 5000]
        )
