"""No loss under a burst: every submission the intake acknowledged, 64 in flight through a
real nats-server, is in the log once and folded once; a retry with its key (sent while the
first is still in flight, or after) gets the same id and adds nothing; an array in the
burst is one event of all its tasks."""

import asyncio
import collections

from allot.bus import EmbeddedNats
from allot.client import AsyncClient
from allot.core import State, apply_record
from allot.core.arrays import parse
from allot.proto.events import ArraySubmitted, JobSubmitted
from allot.services.intake.app import Intake
from tests import builders as b

SUBMISSIONS = 1500
IN_FLIGHT = 64


async def test_every_acknowledged_submission_is_in_the_log_and_folded_once(
    nats_server: EmbeddedNats, intake: Intake
) -> None:
    work: asyncio.Queue[int] = asyncio.Queue()
    for n in range(SUBMISSIONS):
        work.put_nowait(n)
    replies: dict[int, list[tuple[str, bool]]] = collections.defaultdict(list)

    async def submitter(client: AsyncClient) -> None:
        while not work.empty():
            n = work.get_nowait()
            key = f"k{n // 2}" if n % 10 < 4 else None  # pairs of retries, sent together
            spec = b.spec(account=f"lab/t{n % 7}")
            array = parse("0-49%5") if n % 500 == 0 else None
            if array is not None:
                key = f"array-{n}"
            reply = await client.submit(spec, idempotency_key=key, array=array)
            assert reply.job_id is not None
            replies[n].append((reply.job_id, reply.duplicate))

    async with await AsyncClient.connect(nats_server.url) as client:
        await asyncio.gather(*(submitter(client) for _ in range(IN_FLIGHT)))
        records = await client.events.read()

    acknowledged = {job_id for answers in replies.values() for job_id, _ in answers}
    logged = collections.Counter(
        r.event.job_id for r in records if isinstance(r.event, JobSubmitted)
    )
    assert set(logged) == acknowledged  # nothing lost, nothing the client was not told
    assert max(logged.values()) == 1  # a retry added nothing
    duplicates = sum(1 for answers in replies.values() for _, dup in answers if dup)
    assert duplicates == len(replies) - len(acknowledged)  # each retry answered as one

    state = State()
    for record in records:
        apply_record(state, record)
    assert state.ignored_count == 0
    arrays = [r.event.job_id for r in records if isinstance(r.event, ArraySubmitted)]
    assert sorted(state.arrays) == sorted(arrays)
    assert len(arrays) == SUBMISSIONS // 500
    tasks = sum(len(state.arrays[a].tasks) for a in arrays)
    assert len(state.jobs) == len(acknowledged) - len(arrays) + tasks
