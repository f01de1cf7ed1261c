"""In-process hand-off: an enqueue whose own worker has a free slot inserts the job claimed."""

from __future__ import annotations

import asyncio
from typing import Any

from deckyard.db import Database
from deckyard.jobs import JobContext, JobStatus, Runtime
from tests.helpers.runtime import fast_settings


async def test_enqueue_hands_the_job_to_a_free_local_worker(db: Database) -> None:
    rt = Runtime(db, settings=fast_settings(), migrate=False)
    release = asyncio.Event()
    started: list[int] = []

    @rt.handler("k", queue="q")
    async def k(ctx: JobContext) -> Any:
        started.append(ctx.attempt)
        await release.wait()
        return {"attempt": ctx.attempt}

    worker = rt.worker(["q"], concurrency=1)
    async with rt:
        first = await rt.enqueue("k", {})
        # inserted claimed by this worker, attempt 1, and already running here
        assert (first.status, first.attempt, first.lease_owner) == (
            JobStatus.RUNNING,
            1,
            worker.owner,
        )
        assert first.id in worker.running
        # the only slot is taken: the next one goes in pending, for a claim
        second = await rt.enqueue("k", {})
        assert (second.status, second.attempt) == (JobStatus.PENDING, 0)
        # nor is a job for a queue no worker here serves
        other = await rt.enqueue("k", {}, queue="elsewhere")
        assert other.status == JobStatus.PENDING
        release.set()
        done = [await rt.wait(j.id, timeout=10) for j in (first, second)]
        types = [e.type async for e in rt.events(first.id)]
    assert [(d.status, d.attempt, d.result) for d in done] == [
        (JobStatus.SUCCEEDED, 1, {"attempt": 1})
    ] * 2
    assert started == [1, 1]
    assert types.count("started") == 1


async def test_hand_off_can_be_turned_off(db: Database) -> None:
    rt = Runtime(db, settings=fast_settings(job_hand_off=False), migrate=False)

    @rt.handler("k", queue="q")
    async def k(ctx: JobContext) -> None:
        return None

    rt.worker(["q"], concurrency=1)
    async with rt:
        job = await rt.enqueue("k", {})
        assert job.status == JobStatus.PENDING
        assert (await rt.wait(job.id, timeout=10)).status == JobStatus.SUCCEEDED
