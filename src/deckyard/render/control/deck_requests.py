"""Deck renders: one render request for every page of a deck version, opened by a deck job.

The job opens the request itself (no child render per page): one admission, one lease and one
receipt stream for the whole deck, its pages rendered in parallel on the slots the attempt holds and
committed one by one (`store.page_commit`). A lost attempt's successor renders only the pages still
pending. Cancellation reaches the request the way it reaches any job's request (see `requests`): the
job is the request's parent, so the cancel hook, the locked cancel-flag read at opening and the
observer all apply.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from deckyard import tracing
from deckyard.artifacts import ArtifactStore
from deckyard.clock import Clock
from deckyard.config import Settings
from deckyard.db import Database, SharedWaiters
from deckyard.jobs import JobContext, JobError, JobErrorCode, Runtime
from deckyard.render.control.models import (
    DECK_KIND,
    RENDER_REQUEST_EVENT,
    ControlErrorCode,
    RenderRequest,
    RequestStatus,
    ScreenshotSpec,
)
from deckyard.render.control.requests import (
    JobCancels,
    documents_by_reference,
    request_to_resume,
    wait_for_terminal,
)
from deckyard.render.control.store import (
    NewRequest,
    pages_of_request,
    renders_queued,
    request_cancel_for_jobs,
    request_get,
    request_insert,
)
from deckyard.render.protocol import RenderErrorCode

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PageRender:
    """How one page of a deck render ended: its committed result, or an error code.

    `result` has the shape of a one-page request's result (`artifact_key`, `content_type`,
    `size`, `sha256`, `diagnostics`) when the page rendered; a page that failed for its content
    has the renderer's code; a page never committed has its request's code (say, the renderer
    was unavailable until the deadline), so it can never read as rendered.
    """

    index: int
    result: dict[str, Any] | None
    error_code: str | None = None
    message: str | None = None


def deck_input_hash(specs: list[ScreenshotSpec]) -> str:
    """SHA-256 over the pages' input hashes, in order."""
    joined = ",".join(s.input_hash() for s in specs)
    return hashlib.sha256(joined.encode("ascii")).hexdigest()


def deck_queue_check(
    settings: Settings, workspace_id: str, total: int, mine: int, pages: int
) -> None:
    """Refuse a new deck render whose pages would pass a queue limit (`RENDER_QUEUE_FULL`).

    `total` and `mine` count what is queued already, everyone's and this workspace's: active
    one-page render requests and the pages deck requests still have to render, one each, so a deck
    counts like as many one-page requests. A deck larger than a limit never fits and is not retried;
    otherwise the job is retried after `render_retry_after_seconds`.
    """
    for queued, limit, whose in (
        (total, settings.render_queue_limit, "the render queue"),
        (mine, settings.render_workspace_queue_limit, f"workspace {workspace_id}'s render queue"),
    ):
        if queued + pages <= limit:
            continue
        message = f"{pages} pages do not fit in {whose} ({queued} queued, limit {limit})"
        raise JobError(
            ControlErrorCode.QUEUE_FULL.value,
            message,
            retryable=pages <= limit,
            retry_after=settings.render_retry_after_seconds,
        )


class DeckRenders:
    """Opens a job's deck request, waits for it and reads back every page's outcome."""

    def __init__(
        self,
        db: Database,
        runtime: Runtime,
        settings: Settings,
        clock: Clock,
        store: ArtifactStore,
        waiters: SharedWaiters[RenderRequest],
        cancels: JobCancels,
    ) -> None:
        self.db = db
        self.runtime = runtime
        self.settings = settings
        self.clock = clock
        self.store = store
        self.waiters = waiters
        self.cancels = cancels

    async def open(self, ctx: JobContext, specs: list[ScreenshotSpec]) -> RenderRequest:
        """Create the job's deck request, or take over the one a previous try of it opened.

        A new request passes the queue limits first (`deck_queue_check`), under the admission
        lock `request_to_resume` takes, so concurrent decks and screenshots cannot overshoot.
        """
        now = self.clock.now()
        workspace = ctx.job.workspace_id or "default"
        digest = deck_input_hash(specs)
        s = self.settings
        budget = s.render_request_deadline_seconds + len(specs) * s.render_deck_page_seconds
        deadline = now + timedelta(seconds=budget)
        if ctx.deadline_at is not None:
            deadline = min(deadline, ctx.deadline_at)
        render_input: dict[str, Any] = {"pages": [spec.render_input() for spec in specs]}
        render_input = await documents_by_reference(self.store, render_input)
        new = NewRequest(
            kind=DECK_KIND,
            workspace_id=workspace,
            input=tracing.stamped(render_input),
            input_hash=digest,
            max_attempts=s.render_max_attempts,
            deadline_at=deadline,
            parent_job_id=ctx.id,
        )
        async with self.db.write_transaction() as conn:
            earlier = await request_to_resume(self.db, self.runtime, conn, ctx.id, digest)
            if earlier is not None:
                # A retried job resumes its deck render: committed pages are not rendered again.
                return earlier
            total, mine = await renders_queued(conn, workspace)
            deck_queue_check(s, workspace, total, mine, len(specs))
            request, _created = await request_insert(self.db, conn, new, now)
        return request

    async def render(self, ctx: JobContext, specs: list[ScreenshotSpec]) -> list[PageRender]:
        """Render every spec as one deck request and return each page's outcome, in order.

        Waits until the request ends (the control plane ends it by its deadline at the latest,
        within a receipt pass), holding no worker slot meanwhile (`JobContext.slot_released`);
        a wait that outlives the deadline by a lease cancels it.
        """
        with tracing.request_span(DECK_KIND, ctx.id):
            return await self._render(ctx, specs)

    async def _render(self, ctx: JobContext, specs: list[ScreenshotSpec]) -> list[PageRender]:
        request = await self.open(ctx, specs)
        tracing.note_request(request)
        await ctx.emit(RENDER_REQUEST_EVENT, {"request_id": request.id, "pages": len(specs)})
        grace = self.settings.render_lease_seconds + self.settings.render_idle_poll_ceiling_seconds
        timeout = (request.deadline_at - self.clock.now()).total_seconds() + grace
        timed_out = False
        try:
            async with ctx.slot_released():
                done = await wait_for_terminal(self.waiters, request.id, max(0.1, timeout))
        except asyncio.CancelledError:
            await asyncio.shield(self.cancels.observe_quietly(ctx.id))
            raise
        except TimeoutError:
            async with self.db.write_transaction() as conn:
                await request_cancel_for_jobs(self.db, conn, [ctx.id], self.clock.now())
            done, timed_out = await self._current(request.id), True
        tracing.note_request(done)
        if done.status is RequestStatus.CANCELLED and not timed_out:
            await self.cancels.observe_quietly(ctx.id)
            raise JobError(
                JobErrorCode.CANCELLED.value, "the render was cancelled", retryable=False
            )
        return await self.outcomes(done, timed_out=timed_out)

    async def outcomes(
        self, request: RenderRequest, *, timed_out: bool = False
    ) -> list[PageRender]:
        """Every page's outcome of a deck request, read from its committed page rows."""
        async with self.db.read_connection() as conn:
            pages = await pages_of_request(conn, request.id)
        missing = request.error_code or RenderErrorCode.RESULT_LOST.value
        if timed_out or not request.is_terminal:
            missing = RenderErrorCode.DEADLINE_EXCEEDED.value
        outcomes: list[PageRender] = []
        for page in pages:
            if not page.committed:
                message = request.error_message or "the page was not rendered"
                outcomes.append(PageRender(page.page_index, None, missing, message))
            elif page.error_code is not None:
                outcomes.append(
                    PageRender(page.page_index, page.result, page.error_code, page.error_message)
                )
            else:
                outcomes.append(PageRender(page.page_index, page.result))
        return outcomes

    async def _current(self, request_id: int) -> RenderRequest:
        async with self.db.read_connection() as conn:
            request = await request_get(conn, request_id)
        assert request is not None
        return request
