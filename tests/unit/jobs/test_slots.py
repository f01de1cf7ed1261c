"""`Slots`: a waiting job lends its slot out and takes one back; occupancy never over the cap."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from deckyard.clock import SYSTEM_CLOCK
from deckyard.config import Settings
from deckyard.jobs import JobContext, current_job, slot_released
from deckyard.jobs.context import set_current_job
from deckyard.jobs.models import Job
from deckyard.jobs.slots import Slots
from deckyard.jobs.status import JobStatus


class Pool:
    """A stand-in worker: the running job ids, and how often a slot was freed."""

    def __init__(
        self,
        concurrency: int = 2,
        max_suspended: int = 10,
        ending: Callable[[int], bool] | None = None,
    ) -> None:
        self.running: set[int] = set()
        self.freed = 0
        self.slots = Slots(
            concurrency, max_suspended, lambda: len(self.running), self.on_freed, ending
        )

    def on_freed(self) -> None:
        self.freed += 1

    def start(self, *ids: int) -> None:
        for i in ids:
            self.running.add(i)
            self.slots.started()

    def end(self, job_id: int) -> None:
        self.running.discard(job_id)
        self.slots.ended(job_id)
        self.slots.grant()


async def test_a_wait_frees_its_slot_and_takes_it_back_when_one_is_free() -> None:
    pool = Pool()
    pool.start(1, 2)
    assert pool.slots.free() == 0
    async with pool.slots.released(1) as lent:
        assert lent is True
        assert pool.slots.occupied == 1 and pool.slots.free() == 1 and pool.freed == 1
    assert pool.slots.occupied == 2 and not pool.slots.suspended
    assert pool.slots.stats.suspensions == 1 and pool.slots.stats.most_occupied == 2


async def test_a_resumer_waits_for_a_free_slot_and_comes_before_new_work() -> None:
    pool = Pool()
    pool.start(1, 2)
    back = asyncio.Event()

    async def parent() -> None:
        async with pool.slots.released(1):
            pool.start(3)  # the worker claimed a job into the freed slot
        back.set()

    task = asyncio.create_task(parent())
    await asyncio.sleep(0)
    assert pool.slots.occupied == 2 and pool.slots.resuming == 1
    assert pool.slots.free() == -1  # nothing new starts while a resumer queues
    assert not back.is_set()
    pool.end(3)
    await asyncio.wait_for(task, 1)
    assert back.is_set() and pool.slots.occupied == 2 and pool.slots.resuming == 0
    assert pool.slots.stats.most_occupied == 2


async def test_past_the_bound_a_wait_keeps_its_slot() -> None:
    pool = Pool(max_suspended=1)
    pool.start(1, 2)
    async with pool.slots.released(1) as first, pool.slots.released(2) as second:
        assert (first, second) == (True, False)
        assert pool.slots.occupied == 1 and pool.slots.suspended == {1}
    assert pool.slots.occupied == 2


async def test_concurrent_waits_of_one_job_lend_its_slot_once() -> None:
    pool = Pool()
    pool.start(1)
    gates = [asyncio.Event() for _ in range(3)]

    async def wait(gate: asyncio.Event) -> None:
        async with pool.slots.released(1):
            await gate.wait()

    waits = [asyncio.create_task(wait(g)) for g in gates]
    await asyncio.sleep(0)
    assert pool.slots.suspended == {1} and pool.slots.stats.suspensions == 1
    gates[0].set()
    gates[1].set()
    await asyncio.gather(*waits[:2])
    assert pool.slots.suspended == {1}  # one wait is still on
    gates[2].set()
    await waits[2]
    assert not pool.slots.suspended and pool.slots.occupied == 1


async def test_a_cancelled_wait_does_not_queue_for_a_slot() -> None:
    pool = Pool(concurrency=1)
    pool.start(1)

    async def parent() -> None:
        async with pool.slots.released(1):
            pool.start(2)
            await asyncio.Event().wait()

    task = asyncio.create_task(parent())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task  # at once, though job 2 holds the only slot
    assert pool.slots.resuming == 0 and pool.slots.occupied == 1
    assert pool.slots.suspended == {1}  # counted as not occupying until its task is over
    pool.end(1)
    assert not pool.slots.suspended and pool.slots.occupied == 1


async def test_a_cancel_while_queued_for_a_slot_leaves_the_queue() -> None:
    pool = Pool(concurrency=1)
    pool.start(1)

    async def parent() -> None:
        async with pool.slots.released(1):
            pool.start(2)

    task = asyncio.create_task(parent())
    await asyncio.sleep(0)
    assert pool.slots.resuming == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert pool.slots.resuming == 0 and pool.slots.occupied == 1
    pool.end(2)
    assert pool.slots.occupied == 0


async def test_an_error_in_the_wait_still_takes_a_slot_back() -> None:
    pool = Pool(concurrency=1)
    pool.start(1)

    async def parent() -> str:
        try:
            async with pool.slots.released(1):
                pool.start(2)
                raise TimeoutError
        except TimeoutError:
            return "handled"  # the handler goes on working: it must hold a slot again

    task = asyncio.create_task(parent())
    await asyncio.sleep(0)
    assert not task.done() and pool.slots.resuming == 1
    pool.end(2)
    assert await asyncio.wait_for(task, 1) == "handled"
    assert pool.slots.occupied == 1 and not pool.slots.suspended


def job(job_id: int) -> Job:
    now = datetime.now(UTC)
    return Job(
        id=job_id,
        queue="q",
        kind="k",
        payload=None,
        status=JobStatus.RUNNING,
        priority=0,
        run_at=now,
        attempt=1,
        max_attempts=1,
        lease_owner="me",
        lease_expires_at=now,
        dedupe_key=None,
        workspace_id=None,
        parent_id=None,
        deadline_at=None,
        cancel_requested_at=None,
        result=None,
        error_code=None,
        error_message=None,
        created_at=now,
        updated_at=now,
        started_at=now,
        finished_at=None,
    )


async def noop_emit(job_id: int, event_type: str, data: object) -> None:
    return None


async def test_the_context_lends_through_its_worker_and_is_a_no_op_outside_one() -> None:
    alone = JobContext(job=job(7), clock=SYSTEM_CLOCK, emitter=noop_emit)
    async with alone.slot_released() as lent:
        assert lent is False
    async with slot_released() as lent:
        assert lent is False and current_job() is None

    pool = Pool(concurrency=1)
    pool.start(8)
    ctx = JobContext(job=job(8), clock=SYSTEM_CLOCK, emitter=noop_emit, slots=pool.slots)

    async def handler() -> int:
        set_current_job(ctx)

        async def seen() -> int:
            assert current_job() is ctx
            return pool.slots.occupied

        async with slot_released() as lent:
            assert lent is True
            inside = await seen()
        assert await ctx.wait_released(seen()) == 0
        return inside

    assert await asyncio.create_task(handler()) == 0
    assert pool.slots.occupied == 1 and current_job() is None


async def test_a_sub_task_cancelled_by_its_handler_still_takes_the_slot_back() -> None:
    job_task: asyncio.Task[None] | None = None
    pool = Pool(
        concurrency=1,
        ending=lambda _job_id: job_task is not None and job_task.cancelling() > 0,
    )
    pool.start(1)

    async def handler() -> None:
        async def sub() -> None:
            async with pool.slots.released(1):
                await asyncio.Event().wait()

        waiting = asyncio.create_task(sub())
        await asyncio.sleep(0)
        assert pool.slots.suspended == {1}
        pool.start(2)
        waiting.cancel()  # the handler gives up on that wait and goes on working
        with pytest.raises(asyncio.CancelledError):
            await waiting

    job_task = asyncio.create_task(handler())
    await asyncio.sleep(0.01)
    assert not job_task.done() and pool.slots.resuming == 1  # queued behind job 2
    pool.end(2)
    await asyncio.wait_for(job_task, 1)
    assert pool.slots.occupied == 1 and not pool.slots.suspended


def test_by_default_one_nodes_waiting_deck_jobs_fit_the_workspace_render_queue() -> None:
    # Each suspended or slot-holding deck job has at most one active screenshot child: a
    # publish of the biggest deck must not fill the workspace's render queue (RENDER_QUEUE_FULL
    # would make its pages `unavailable`).
    s = Settings.load()
    deck = s.job_max_suspended + s.deck_job_concurrency
    ai = s.job_max_suspended + s.ai_job_concurrency
    assert deck + ai < s.render_workspace_queue_limit
