import msgspec
from hypothesis import given
from hypothesis import strategies as st

from allot.core import State, apply
from allot.core.charging import Charge, charges_due
from allot.proto.events import JobSpec, JobSubmitted, NodeRegistered, UsageCharged
from tests import builders as b
from tests.builders import fold

S = 10**9  # one second in ns
MIN = 60 * S


def charged(c: Charge) -> UsageCharged:
    return UsageCharged(
        meta=b.meta(),
        path=c.account,
        job_id=c.job_id,
        attempt=c.attempt,
        from_ns=c.from_ns,
        to_ns=c.to_ns,
        gpu_ms=c.gpu_ms,
    )


def started_at(at: int, job_id: str = "j1", node: str = "n1", gpus: list[int] | None = None):  # type: ignore[no-untyped-def]
    event = b.started(job_id, node, gpus or [0, 1])
    return msgspec.structs.replace(event, meta=msgspec.structs.replace(event.meta, at=at))


def running_two_gpus() -> State:
    return fold(
        b.node("n1", 8),
        b.submitted("j1", gpus=2),  # account lab/team
        b.plan(("j1", "n1", [0, 1])),
        started_at(0),
    )


def test_a_running_job_is_charged_once_per_interval() -> None:
    state = running_two_gpus()
    assert charges_due(state, now=59 * S, interval_ns=MIN) == []
    [charge] = charges_due(state, now=MIN, interval_ns=MIN)
    assert (charge.account, charge.from_ns, charge.to_ns, charge.gpu_ms) == (
        "lab/team",
        0,
        MIN,
        120_000,
    )
    apply(state, 5, charged(charge))
    assert charges_due(state, now=MIN + 1, interval_ns=MIN) == []
    assert state.usage["lab/team"].total_gpu_ms == 120_000
    assert state.usage["lab"].total_gpu_ms == 120_000  # every ancestor is charged too


def test_a_finished_job_is_charged_to_its_end_at_once() -> None:
    state = running_two_gpus()
    exit_event = b.exited("j1", "n1", 0)
    apply(
        state,
        5,
        msgspec.structs.replace(
            exit_event, meta=msgspec.structs.replace(exit_event.meta, at=90 * S)
        ),
    )
    [charge] = charges_due(state, now=91 * S, interval_ns=MIN)
    assert (charge.from_ns, charge.to_ns, charge.gpu_ms) == (0, 90 * S, 180_000)
    apply(state, 6, charged(charge))
    assert state.unbilled == {}
    assert charges_due(state, now=10 * MIN, interval_ns=MIN) == []


def test_a_repeated_charge_is_ignored() -> None:
    state = running_two_gpus()
    [charge] = charges_due(state, now=MIN, interval_ns=MIN)
    apply(state, 5, charged(charge))
    apply(state, 6, charged(charge))  # redelivered, or sent again by a restarted ledger
    assert state.usage["lab/team"].total_gpu_ms == 120_000
    assert "not unbilled from 0" in state.ignored[-1].reason


def test_cpu_and_memory_heavy_jobs_pay_for_their_dominant_share() -> None:
    node = NodeRegistered(
        meta=b.meta(),
        node_id="n1",
        hostname="h",
        gpus=b.node("n1", 8).gpus,
        cpus=64,
        memory_mib=512_000,
    )
    spec = JobSpec(account="lab/team", gpus=1, command=["x"], cpus=32, memory_mib=64_000)
    state = fold(
        node,
        JobSubmitted(meta=b.meta(), job_id="j1", spec=spec),
        b.plan(("j1", "n1", [0])),
        started_at(0, gpus=[0]),
    )
    [charge] = charges_due(state, now=MIN, interval_ns=MIN)
    # Half the CPUs of an 8-GPU cluster weigh as 4 GPUs; memory (1/8) as 1; GPUs: 1.
    assert charge.gpu_ms == 4 * 60_000


@given(
    st.lists(
        st.tuples(st.sampled_from(["lab/a", "lab/b", "lab/b/x", "ops"]), st.integers(1, 10**6)),
        max_size=20,
    )
)
def test_charges_to_children_add_up_to_the_parent(charges: list[tuple[str, int]]) -> None:
    state = State()
    seq = 0
    for account, amount in charges:
        job_id = f"j{seq}"
        spec = JobSpec(account=account, gpus=1, command=["x"])
        for event in (
            b.node("n1", 1),
            JobSubmitted(meta=b.meta(), job_id=job_id, spec=spec),
            b.plan((job_id, "n1", [0])),
            started_at(0, job_id=job_id, gpus=[0]),
            UsageCharged(
                meta=b.meta(),
                path=account,
                job_id=job_id,
                attempt=0,
                from_ns=0,
                to_ns=S,
                gpu_ms=amount,
            ),
            b.exited(job_id, "n1"),
        ):
            seq += 1
            apply(state, seq, event)
    usage = {a: u.total_gpu_ms for a, u in state.usage.items()}
    assert usage.get("lab", 0) == usage.get("lab/a", 0) + usage.get("lab/b", 0)
    assert usage.get("lab/b", 0) >= usage.get("lab/b/x", 0)
    assert sum(amount for _, amount in charges) == usage.get("lab", 0) + usage.get("ops", 0)


def ledger_view(state: State) -> bytes:
    return msgspec.json.encode(
        [
            sorted(state.accounts.items()),
            sorted((a, u.total_gpu_ms, sorted(u.by_hour.items())) for a, u in state.usage.items()),
            sorted(state.unbilled.items()),
        ]
    )


def test_replaying_the_log_gives_the_same_ledger_and_redelivery_charges_nothing_twice() -> None:
    from allot.bus.codec import decode, encode
    from allot.client.bench_ledger import synthetic_log

    log = synthetic_log(3000, teams=8, seed=7)
    first = fold(*log)
    assert first.usage
    assert first.ignored_count == 0
    replayed = fold(*(decode(encode(e)) for e in log))
    assert ledger_view(replayed) == ledger_view(first)
    # Every charge delivered twice (a consumer that crashed before acking it).
    doubled = [x for e in log for x in ([e, e] if isinstance(e, UsageCharged) else [e])]
    redelivered = fold(*doubled)
    assert ledger_view(redelivered) == ledger_view(first)
    assert redelivered.ignored_count == sum(isinstance(e, UsageCharged) for e in log)
    assert {i.type for i in redelivered.ignored} == {"UsageCharged"}


@given(
    start=st.integers(0, 10**15),
    length=st.integers(1, 10**13),
    amount=st.integers(0, 10**12),
    unit=st.integers(10**10, 10**13),
    origin=st.integers(0, 10**15),
)
def test_a_charge_split_over_hours_or_periods_adds_up_exactly(
    start: int, length: int, amount: int, unit: int, origin: int
) -> None:
    from allot.core.model import split

    pieces = split(start, start + length, amount, origin, unit)
    assert sum(share for _, share in pieces) == amount
    slots = [slot for slot, _ in pieces]
    assert slots == list(range(slots[0], slots[0] + len(slots)))
    assert slots[0] == (start - origin) // unit


def test_a_long_charge_is_spread_over_the_hours_it_covers() -> None:
    state = running_two_gpus()
    two_hours = 2 * 3600 * S
    [due] = charges_due(state, now=two_hours, interval_ns=MIN)
    apply(state, 5, charged(due))
    assert state.usage["lab/team"].by_hour == {0: due.gpu_ms // 2, 1: due.gpu_ms // 2}
