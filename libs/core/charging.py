"""What the ledger charges, and when: ``charges_due(state, now, interval_ns)``.

A running attempt is charged once per accounting interval of ``now`` (up to ``now``); an
attempt that stopped holding GPUs is charged at once, up to the moment it stopped. Every
charge starts where the last one ended, so a charge repeated by a retry or a restarted
ledger does not fit and is ignored by the fold: nothing is charged twice.

Charges are integer GPU-milliseconds, DRF-weighted (R10): when a job asks for CPUs or
memory, it pays for its dominant share of the cluster, expressed in GPUs.
"""

import msgspec

from allot.core.model import State, UnbilledRun


class Charge(msgspec.Struct, frozen=True, kw_only=True):
    account: str
    job_id: str
    attempt: int
    from_ns: int
    to_ns: int
    gpu_ms: int


class Capacity(msgspec.Struct, frozen=True, kw_only=True):
    gpus: int
    cpus: int
    memory_mib: int


def capacity(state: State) -> Capacity:
    """What the registered, not lost nodes hold."""
    nodes = [n for _, n in sorted(state.nodes.items()) if not n.lost]
    return Capacity(
        gpus=sum(len(n.gpus) for n in nodes),
        cpus=sum(n.cpus for n in nodes),
        memory_mib=sum(n.memory_mib for n in nodes),
    )


def gpu_ms(run: UnbilledRun, elapsed_ns: int, cluster: Capacity) -> int:
    """Dominant-resource GPU-milliseconds for ``elapsed_ns`` of the run."""
    ms = elapsed_ns // 1_000_000
    shares = [run.gpus * ms]
    if cluster.cpus and run.cpus:
        shares.append(run.cpus * cluster.gpus * ms // cluster.cpus)
    if cluster.memory_mib and run.memory_mib:
        shares.append(run.memory_mib * cluster.gpus * ms // cluster.memory_mib)
    return max(shares)


def charges_due(state: State, now: int, interval_ns: int) -> list[Charge]:
    cluster = capacity(state)
    due: list[Charge] = []
    for (job_id, attempt), run in sorted(state.unbilled.items()):
        if run.until_ns is not None:
            to_ns = run.until_ns
        elif now - run.from_ns >= interval_ns:
            to_ns = now
        else:
            continue
        due.append(
            Charge(
                account=run.account,
                job_id=job_id,
                attempt=attempt,
                from_ns=run.from_ns,
                to_ns=to_ns,
                gpu_ms=gpu_ms(run, to_ns - run.from_ns, cluster),
            )
        )
    return due
