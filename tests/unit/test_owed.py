import msgspec

from allot.core.owed import owed_and_delivered
from allot.proto.events import AccountDefined, AccountSettings, Event, JobExited, UsageCharged
from tests import builders as b

HOUR = 3600 * 10**9
HOUR_MS = 3_600_000


class Rec(msgspec.Struct, frozen=True):
    seq: int
    event: Event
    type: str = ""
    error: str = ""


def at(event: Event, t: int) -> Event:
    return msgspec.structs.replace(event, meta=msgspec.structs.replace(event.meta, at=t))


def records(*events: Event) -> list[Rec]:
    return [Rec(seq=i, event=e) for i, e in enumerate(events, start=1)]


def account(path: str, weight: int) -> AccountDefined:
    return AccountDefined(meta=b.meta(), path=path, settings=AccountSettings(weight=weight))


def job(
    job_id: str, path: str, indices: list[int], start: int, end: int, charged: int
) -> list[Event]:
    """A job on n1's GPUs ``indices`` from ``start`` to ``end``, charged ``charged``."""
    spec = msgspec.structs.replace(b.spec(gpus=len(indices)), account=path)
    return [
        at(msgspec.structs.replace(b.submitted(job_id), spec=spec), start),
        b.plan((job_id, "n1", indices)),
        at(b.started(job_id, "n1", indices), start),
        UsageCharged(
            meta=b.meta(),
            path=path,
            job_id=job_id,
            attempt=0,
            from_ns=start,
            to_ns=end,
            gpu_ms=charged,
        ),
        at(
            JobExited(meta=b.meta(), job_id=job_id, node_id="n1", exit_code=0, output_path="-"), end
        ),
    ]


def test_owed_is_the_share_capped_by_demand_hour_by_hour() -> None:
    # A 4-GPU node for two hours; lab/a (weight 3) and lab/b (weight 1).
    # Hour 0: a wants 1 GPU, b wants 3: a is owed min(3, 1) = 1 GPU-h, b min(1, 3) = 1.
    # Hour 1: only b wants, 2 GPUs: b is owed min(1, 2) = 1 GPU-h, a nothing.
    log = records(
        at(b.node("n1", 4), 0),
        account("lab", 1),
        account("lab/a", 3),
        account("lab/b", 1),
        *job("a1", "lab/a", [0], 0, HOUR, HOUR_MS),
        *job("b1", "lab/b", [1, 2, 3], 0, HOUR, 3 * HOUR_MS),
        *job("b2", "lab/b", [2, 3], HOUR, 2 * HOUR, 2 * HOUR_MS),
    )
    report = {r.account: r for r in owed_and_delivered(log, 0, 2 * HOUR)}
    a, bb, lab = report["lab/a"], report["lab/b"], report["lab"]
    assert (a.share_ppm, bb.share_ppm, lab.share_ppm) == (750_000, 250_000, 1_000_000)
    assert (a.owed_gpu_ms, a.delivered_gpu_ms, a.ratio) == (HOUR_MS, HOUR_MS, 1.0)
    assert (bb.owed_gpu_ms, bb.delivered_gpu_ms) == (2 * HOUR_MS, 5 * HOUR_MS)
    assert bb.ratio == 2.5  # it used what a left idle
    assert (lab.owed_gpu_ms, lab.delivered_gpu_ms) == (6 * HOUR_MS, 6 * HOUR_MS)


def test_the_window_clips_demand_capacity_and_delivery() -> None:
    log = records(
        at(b.node("n1", 4), 0),
        account("lab", 1),
        account("lab/a", 1),
        *job("a1", "lab/a", [0, 1], 0, 2 * HOUR, 4 * HOUR_MS),
    )
    [_, a] = owed_and_delivered(log, HOUR, 2 * HOUR)
    assert (a.owed_gpu_ms, a.delivered_gpu_ms, a.demand_gpu_ms) == (
        2 * HOUR_MS,
        2 * HOUR_MS,
        2 * HOUR_MS,
    )
