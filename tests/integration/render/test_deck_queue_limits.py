"""Deck requests count in the render queue limits, one queued one-page render per page to render.

A deck job's request is refused (`RENDER_QUEUE_FULL`) when its pages would pass the global or
the workspace's queue limit, counting active one-page render requests and other decks' pending
pages; a screenshot is refused while decks' pending pages fill the queue. SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from deckyard.config import Settings
from deckyard.db import Database
from deckyard.jobs import Job, JobContext, JobError, JobStatus, Runtime
from deckyard.render.control.deck_requests import deck_queue_check
from deckyard.render.control.models import ScreenshotSpec
from deckyard.render.control.requests import RenderQueueFull
from deckyard.render.control.service import RenderService

DECK_OPEN = "test.deck_open"
DECK_QUEUE = "decks"


def spec(n: int) -> ScreenshotSpec:
    return ScreenshotSpec(html=f"<p>{n}</p>")


@dataclass
class Queues:
    runtime: Runtime
    service: RenderService

    async def deck(self, workspace: str, pages: int, first: int = 0) -> Job:
        """Run a deck job that only opens its deck request; return the finished job."""
        specs = [spec(first + i).model_dump(mode="json") for i in range(pages)]
        job = await self.runtime.enqueue(
            DECK_OPEN, {"specs": specs}, queue=DECK_QUEUE, workspace_id=workspace
        )
        return await self.runtime.wait(job.id, timeout=20)


@pytest.fixture
async def queues(db: Database, tmp_path: Path) -> AsyncIterator[Queues]:
    s = Settings.load(
        render_queue_limit=6,
        render_workspace_queue_limit=4,
        render_retry_after_seconds=0.0,
        renderers=0,
        data_dir=tmp_path,
    )
    runtime = Runtime(db, settings=s, migrate=False)
    service = RenderService(db, runtime, s, supervise=False)

    @runtime.handler(DECK_OPEN, queue=DECK_QUEUE, max_attempts=1)
    async def open_deck(ctx: JobContext) -> dict[str, Any]:
        specs = [ScreenshotSpec.model_validate(x) for x in ctx.payload["specs"]]
        request = await service.decks.open(ctx, specs)
        return {"request_id": request.id}

    # no renderer: every render request stays queued, and counts as queued
    runtime.worker([DECK_QUEUE], concurrency=1)
    await runtime.start()
    try:
        yield Queues(runtime, service)
    finally:
        await runtime.stop()


async def test_a_deck_whose_pages_pass_the_workspace_limit_is_refused(queues: Queues) -> None:
    await queues.service.submit(spec(100), workspace_id="a")
    await queues.service.submit(spec(101), workspace_id="a")
    refused = await queues.deck("a", pages=3)
    assert refused.status is JobStatus.FAILED
    assert refused.error_code == "RENDER_QUEUE_FULL", refused.error_message
    assert await queues.service.request_for_job(refused.id) is None
    opened = await queues.deck("a", pages=2)
    assert opened.status is JobStatus.SUCCEEDED, opened.error_message
    # the workspace's queue is full now: two screenshots and two pages still to render
    with pytest.raises(RenderQueueFull, match="workspace a"):
        await queues.service.submit(spec(102), workspace_id="a")
    await queues.service.submit(spec(102), workspace_id="b")


async def test_decks_pending_pages_count_in_the_global_limit(queues: Queues) -> None:
    assert (await queues.deck("a", pages=4)).status is JobStatus.SUCCEEDED
    refused = await queues.deck("b", pages=3)
    assert refused.status is JobStatus.FAILED
    assert refused.error_code == "RENDER_QUEUE_FULL", refused.error_message
    assert (await queues.deck("b", pages=2, first=10)).status is JobStatus.SUCCEEDED
    with pytest.raises(RenderQueueFull, match="screenshots are queued"):
        await queues.service.submit(spec(200), workspace_id="c")


def test_a_deck_larger_than_a_limit_is_not_retried() -> None:
    s = Settings.load(render_queue_limit=6, render_workspace_queue_limit=4)
    with pytest.raises(JobError) as never:
        deck_queue_check(s, "a", 0, 0, pages=5)
    assert never.value.code == "RENDER_QUEUE_FULL" and not never.value.retryable
    with pytest.raises(JobError) as later:
        deck_queue_check(s, "a", 3, 1, pages=4)
    assert later.value.retryable and "the render queue" in str(later.value)
    deck_queue_check(s, "a", 2, 0, pages=4)
