"""The simulator decides as the running services do: a small trace run on the real stack,
then extracted from its log and simulated, gives the same admissions in the same order on
the same GPUs, through a reservation, a backfill and a gang that waits for a whole node."""

from pathlib import Path

from allot.client.logfile import export_log
from allot.client.replay import all_records
from allot.client.stack import NodeShape, Stack
from allot.core import DEFAULT_POLICY
from allot.proto.events import Event, JobSpec, PlanComputed
from allot.sim.simulator import Settings, Simulator
from allot.sim.trace import read_allot_log
from tests.stack import python, until

S = 10**9
# (GPUs, seconds it runs, declared max runtime in s), submitted at once in this order.
# Ends are at least 0.4 s apart, far more than the stack's start-up jitter.
TRACE = [
    (2, 1.6, 4),  # starts at once on GPUs 0-1
    (4, 0.4, None),  # waits for the whole node: reserved at 0's declared end
    (1, 3.0, None),  # would delay the reservation: waits
    (1, 0.5, 1),  # ends before the reservation starts: backfilled
    (3, 0.8, None),  # starts with 2 once 1 is done
    (1, 1.2, None),  # starts when 4 ends
]


def admissions(events: list[Event]) -> list[tuple[str, list[int]]]:
    return [
        (a.job_id, sorted(g for p in a.placements for g in p.gpus))
        for e in events
        if isinstance(e, PlanComputed)
        for a in e.admissions
    ]


async def test_a_trace_simulated_is_decided_as_the_stack_decided_it(tmp_path: Path) -> None:
    stack = Stack(tmp_path / "allot", [NodeShape(node_id="node-1", gpus=4)], restart=False)
    async with stack, await stack.client() as client:
        # The accounts the simulator defines: the trace's one account, all GPUs its quota.
        await client.apply_accounts({"lab": {}, "lab/sim": {"quota": {"gpu": 4}}})
        ids = []
        for gpus, seconds, max_runtime in TRACE:
            spec = JobSpec(
                account="lab/sim",
                gpus=gpus,
                command=python(f"import time; time.sleep({seconds})"),
                max_runtime_ns=max_runtime * S if max_runtime else None,
            )
            ids.append((await client.submit(spec)).job_id)
        await until(
            client,
            lambda s: all(j in s.jobs and s.jobs[j].status.terminal for j in ids),
            timeout=30,
        )
        log = tmp_path / "live.jsonl"
        await export_log(all_records(client.events), log)
        live = [r.event for r in await client.events.read() if r.event is not None]

    jobs = read_allot_log(log)
    assert sorted(j.job_id for j in jobs) == sorted(ids)
    simulator = Simulator(jobs, Settings(nodes=1, gpus_per_node=4), DEFAULT_POLICY, record=True)
    simulator.run()
    assert simulator.events is not None

    decided = admissions(live)
    assert [job_id for job_id, _ in decided] == [ids[n] for n in (0, 3, 1, 2, 4, 5)]
    assert admissions(simulator.events) == decided
