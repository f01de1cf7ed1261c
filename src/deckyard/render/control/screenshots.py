"""Screenshot jobs: the handler that opens or joins a render request and waits for it to end.

The wait (`wait_for_terminal`) is woken by the request's state change, never by a fast poll, and
holds no worker slot (`JobContext.slot_released`): the render worker runs other screenshot jobs
while this one's request is queued or rendering.

Cancellation reaches the request three ways, so a cancelled job never leaves a live render:

1. the cancel hook (`Runtime.on_cancel`) cancels the job's requests in the cancel's own
   transaction;
2. opening a request locks the job row and re-reads its cancel flag in the same transaction, so
   a cancel that committed first is seen and no request is created;
3. the observer: when the handler is stopped, it re-reads the job's cancel flag in a short
   session and cancels any request the job still has, closing "cancel committed, request
   enqueued afterwards" whatever the isolation level. A stop for any other reason (shutdown,
   lost lease) leaves the request alone for the job's next attempt to join.

A render nobody keeps (`POST /v1/validate`) skips the job: `open_direct` inserts its request
under the admission lock (counted against the same queue limits), the caller waits on it and
then `request_forget` deletes it with its attempts; `request_cancel` ends one the caller no
longer waits for. Its deadline is the caller's wait, so a request whose caller died ends by
itself.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard import tracing
from deckyard.artifacts import ArtifactStore
from deckyard.clock import Clock
from deckyard.config import Settings
from deckyard.db import Database, SharedWaiters
from deckyard.jobs import JobContext, JobError, JobErrorCode, JobStatus, Runtime
from deckyard.render.control.coordinator import queue_check
from deckyard.render.control.inputs import document_object_key, documents_by_reference
from deckyard.render.control.models import (
    RENDER_REQUEST_EVENT,
    SCREENSHOT_KIND,
    WAKE_REQUESTS,
    ControlErrorCode,
    RendererState,
    RenderRequest,
    RequestStatus,
    ScreenshotSpec,
    input_digest,
)
from deckyard.render.control.store import (
    NewRequest,
    renderer_list,
    request_adopt,
    request_cancel_for_jobs,
    request_insert,
    request_latest_of_job,
    request_state,
    requests_direct_active_count,
    requests_ended,
)
from deckyard.render.control.store_pages import pages_queued
from deckyard.render.control.store_retention import (
    render_document_keys_referenced,
    render_requests_prune,
)
from deckyard.render.protocol import error_kind

log = logging.getLogger(__name__)

RENDER_QUEUE = "render"


class RequestNotFound(LookupError):
    """No render request has that id."""


async def open_direct(
    db: Database,
    runtime: Runtime,
    settings: Settings,
    store: ArtifactStore,
    spec: ScreenshotSpec,
    *,
    workspace_id: str,
    deadline_at: datetime,
    now: datetime,
    capture: bool = True,
) -> RenderRequest | None:
    """Insert a render request without a job, or None when no renderer is up (rule Q0).

    Its document is stored by its content key before the row, as for every render (`inputs.py`),
    deleted with the row once answered (`documents_forget`), unless another request names it.
    In the row by value, every state change of the request rewrote the whole ~780 KiB row
    (SQLite rewrites a row with its overflow pages), and a validation's writes grew the WAL by
    megabytes: a checkpoint stalled every few validations (p95 509 ms against 314 ms by key,
    `bench/validate_latency.py`). Without `capture` the renderer takes no picture; the result
    carries the diagnostics only.

    One write transaction: the admission lock, the queue limits (screenshot jobs and these
    requests together; raises `RenderQueueFull`), the renderer check and the insert.
    """
    new = NewRequest(
        kind=SCREENSHOT_KIND,
        workspace_id=workspace_id,
        input=tracing.stamped(
            await documents_by_reference(store, spec.render_input(capture=capture))
        ),
        input_hash=spec.input_hash(capture=capture),
        max_attempts=settings.render_max_attempts,
        deadline_at=deadline_at,
    )

    async def admit(conn: AsyncConnection) -> RenderRequest | None:
        await db.acquire_admission_lock(conn)
        if not any(r.state is RendererState.UP for r in await renderer_list(conn)):
            return None
        jobs_total, jobs_mine = await runtime.active_count(SCREENSHOT_KIND, workspace_id, conn=conn)
        total, mine = await requests_direct_active_count(conn, SCREENSHOT_KIND, workspace_id)
        pages, my_pages = await pages_queued(conn, workspace_id)
        queue_check(settings, workspace_id, jobs_total + total + pages, jobs_mine + mine + my_pages)
        request, _created = await request_insert(db, conn, new, now)
        return request

    return await db.write(admit)


async def screenshot_payload(
    store: ArtifactStore, spec: ScreenshotSpec, *, dedupe: bool
) -> tuple[dict[str, Any], str]:
    """A screenshot job's payload and its input hash: `{"render": ..., "dedupe": ...}`, the
    render input with its document stored by content key (`inputs.py`), as the request's row and
    the renderer call will name it.

    Store it before the job row commits; while the job is active, its payload keeps the document
    from the artefact sweep (`render_document_keys_referenced`). By value, the ~780 KiB page was
    written with the job row, rewritten by each of its state changes (SQLite rewrites a row with
    its overflow pages), decoded at every claim and sent back by `GET /v1/jobs/{id}`.
    """
    render = await documents_by_reference(store, spec.render_input())
    return tracing.stamped({"render": render, "dedupe": dedupe}), input_digest(render)


def payload_render(payload: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The render input and input hash of a screenshot job's payload: `{"render": ...}`
    (`screenshot_payload`), or `{"spec": ...}` with the page by value, as jobs enqueued by
    earlier versions hold it (still in the queue across an upgrade)."""
    if "render" in payload:
        render: dict[str, Any] = payload["render"]
        return render, input_digest(render)
    spec = ScreenshotSpec.model_validate(payload["spec"])
    return spec.render_input(), spec.input_hash()


async def request_forget(db: Database, request_id: int) -> None:
    """Delete a finished request opened without a job, with its attempts (no-op while active)."""
    await db.write(lambda conn: render_requests_prune(conn, [request_id]))


async def documents_forget(db: Database, store: ArtifactStore, keys: Sequence[str]) -> list[str]:
    """Delete the documents of content `keys` (`inputs.py`) that no render request names; the
    object keys deleted. For a finished request's inputs that nobody keeps (a validation's)."""
    if not keys:
        return []
    objects = [document_object_key(key) for key in keys]
    async with db.read_connection() as conn:
        named = await render_document_keys_referenced(conn, objects)
    return [key for key in objects if key not in named and await store.delete(key)]


def request_waiters(db: Database, recheck_seconds: float) -> SharedWaiters[RenderRequest]:
    """Waiters for render requests to end (without their `input`), one read per state change.

    Every request state change wakes `WAKE_REQUESTS` at commit (in process, and through NOTIFY
    on PostgreSQL); one reader serves every waiter of the node, where each waiter re-reading its
    own request made N screenshots in flight cost N reads per state change.
    """
    return SharedWaiters(db, WAKE_REQUESTS, requests_ended, recheck_seconds, "render.waiters")


async def wait_for_terminal(
    waiters: SharedWaiters[RenderRequest], request_id: int, timeout: float | None
) -> RenderRequest:
    """Return the request once it is terminal (without its `input`); reads only, never writes."""
    async with asyncio.timeout(timeout):
        request = await waiters.wait(request_id)
    if request is None:
        raise RequestNotFound(request_id)
    return request


async def request_to_resume(
    db: Database, runtime: Runtime, conn: AsyncConnection, job_id: int, digest: str
) -> RenderRequest | None:
    """The first step of opening a job's render request, inside its write transaction.

    Refuses a job whose cancel was asked or that is no longer running (the cancel flag is read
    under a row lock, so a cancel cannot slip between this and the insert), takes the admission
    lock, and returns the job's earlier request for the same input when it can still be used:
    a retried job (its first attempt lost its connection or lease after the render finished, or
    in the middle of a deck) takes the render it already has instead of rendering twice.
    """
    status, asked = await runtime.cancel_flag(job_id, conn, lock=True)
    if asked or status != JobStatus.RUNNING.value:
        raise JobError(JobErrorCode.CANCELLED.value, "cancelled", retryable=False)
    await db.acquire_admission_lock(conn)
    earlier = await request_latest_of_job(conn, job_id)
    if earlier is not None and earlier.input_hash == digest and earlier.reusable:
        return earlier
    return None


class ScreenshotHandler:
    """The `screenshot` job handler, the cancel hook and the cancel observer."""

    def __init__(
        self,
        db: Database,
        runtime: Runtime,
        settings: Settings,
        clock: Clock,
        store: ArtifactStore | None = None,
    ) -> None:
        self.db = db
        self.runtime = runtime
        self.settings = settings
        self.clock = clock
        self.store = store
        """Where documents go by reference (`inputs.py`); None keeps them in the row."""
        self.waiters = request_waiters(db, settings.render_idle_poll_ceiling_seconds)
        """Every wait for a request of this node, screenshot, deck or validation, shares it."""

    async def cancel_hook(self, conn: AsyncConnection, job_ids: list[int], now: datetime) -> None:
        """Cancel the render requests of cancelled jobs inside the cancel's transaction."""
        await request_cancel_for_jobs(self.db, conn, job_ids, now)

    async def observe_cancel(self, job_id: int) -> int:
        """Cancel the job's live requests if (and only if) the job was asked to cancel."""
        async with self.db.write_transaction() as conn:
            _status, asked = await self.runtime.cancel_flag(job_id, conn, lock=True)
            if not asked:
                return 0
            return await request_cancel_for_jobs(self.db, conn, [job_id], self.clock.now())

    async def open_request(self, ctx: JobContext) -> RenderRequest:
        """Create the job's render request, or join the active one for the same target."""
        now = self.clock.now()
        workspace = ctx.job.workspace_id or "default"
        render_input, digest = payload_render(ctx.payload)
        await self._check_stored(render_input)
        dedupe = ctx.payload.get("dedupe", True)
        deadline = now + timedelta(seconds=self.settings.render_request_deadline_seconds)
        if ctx.deadline_at is not None:
            deadline = min(deadline, ctx.deadline_at)
        if self.store is not None:
            render_input = await documents_by_reference(self.store, render_input)
        new = NewRequest(
            kind=SCREENSHOT_KIND,
            workspace_id=workspace,
            input=tracing.stamped(render_input),
            input_hash=digest,
            max_attempts=self.settings.render_max_attempts,
            deadline_at=deadline,
            dedupe_key=f"{workspace}:{digest}" if dedupe else f"job:{ctx.id}",
            parent_job_id=ctx.id,
        )
        async with self.db.write_transaction() as conn:
            earlier = await request_to_resume(self.db, self.runtime, conn, ctx.id, digest)
            if earlier is not None:
                return earlier
            request, created = await request_insert(self.db, conn, new, now)
            if not created:
                await request_adopt(conn, request.id, ctx.id, now)
        return request

    async def __call__(self, ctx: JobContext) -> dict[str, Any]:
        """Render the job's spec through a render request and return the committed result."""
        with tracing.request_span(SCREENSHOT_KIND, ctx.id):
            return await self._render(ctx)

    async def _render(self, ctx: JobContext) -> dict[str, Any]:
        request = await self.open_request(ctx)
        tracing.note_request(request)
        await ctx.emit(RENDER_REQUEST_EVENT, {"request_id": request.id})
        try:
            async with ctx.slot_released():
                done = await wait_for_terminal(self.waiters, request.id, None)
        except asyncio.CancelledError:
            await asyncio.shield(self._observe_quietly(ctx.id))
            raise
        tracing.note_request(done)
        if done.status is RequestStatus.SUCCEEDED:
            ctx.on_success(lambda conn: self._still_succeeded(conn, done.id))
            return {"request_id": done.id, **(done.result or {})}
        code = done.error_code or "RENDER_RESULT_LOST"
        if done.status is RequestStatus.CANCELLED:
            await self._observe_quietly(ctx.id)
            raise JobError(
                JobErrorCode.CANCELLED.value, "the render was cancelled", retryable=False
            )
        await ctx.emit(
            "render_failed",
            {"request_id": done.id, "error_code": code, "error_kind": error_kind(code).value},
        )
        raise JobError(code, done.error_message or code, retryable=False)

    async def _check_stored(self, render_input: dict[str, Any]) -> None:
        """Refuse a job whose page, named by key, is no longer stored.

        Its payload keeps it from the sweep only while the job is active: a job retried after
        the sweep took its page fails at once, saying so, instead of as a lost input after
        every render attempt.
        """
        key = render_input.get("document_key")
        if self.store is None or not isinstance(key, str):
            return
        if not await self.store.exists(document_object_key(key)):
            raise JobError(
                ControlErrorCode.INPUT_GONE.value,
                "this screenshot's page is no longer stored (the artefact sweep deletes it "
                "once the job has ended); submit the screenshot again",
                retryable=False,
            )

    async def _observe_quietly(self, job_id: int) -> None:
        try:
            await self.observe_cancel(job_id)
        except Exception:
            log.exception(
                "job %d: cancel observer failed; the request's deadline bounds it", job_id
            )

    async def _still_succeeded(self, conn: AsyncConnection, request_id: int) -> None:
        request = await request_state(conn, request_id)
        if request is None or request.status is not RequestStatus.SUCCEEDED:
            raise RuntimeError(f"render request {request_id} is no longer succeeded")
