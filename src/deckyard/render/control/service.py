"""`RenderService`: the render control plane's facade for the API and `deckyard serve`."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.artifacts import ArtifactStore
from deckyard.clock import SYSTEM_CLOCK, Clock
from deckyard.config import Settings
from deckyard.db import Database
from deckyard.jobs import Runtime
from deckyard.loop import Loop
from deckyard.render.control.client import RendererSources, configured_sources
from deckyard.render.control.coordinator import Coordinator
from deckyard.render.control.deck_requests import DeckRenders
from deckyard.render.control.models import (
    RenderAttempt,
    RenderPage,
    RenderRequest,
    RequestStatus,
    ScreenshotSpec,
)
from deckyard.render.control.requests import (
    JobCancels,
    NoRendererUp,
    Opening,
    RenderQueueFull,
    RequestFollowers,
    RequestNotFound,
    document_keys,
    document_object_key,
    documents_forget,
    open_request,
    queue_check,
    request_forget,
    request_waiters,
    wait_for_terminal,
)
from deckyard.render.control.store import (
    attempts_of_request,
    occupancy_snapshot,
    pages_of_request,
    renderer_list,
    renders_queued,
    request_active_by_dedupe,
    request_cancel,
    request_get,
    request_latest_of_job,
    request_retry,
    requests_kept_finished_after,
    requests_of_workspace,
)
from deckyard.render.control.supervisor import Supervisor
from deckyard.render.protocol import document_key

log = logging.getLogger(__name__)


class RenderNotRetryable(Exception):
    """The request is active or succeeded, or a job owns it (retry the job)."""


class RenderDedupeConflict(Exception):
    """Another active request holds the retried request's dedupe key."""

    def __init__(self, message: str, holder: int) -> None:
        super().__init__(message)
        self.holder = holder


class RenderInputGone(Exception):
    """The retried request's page is no longer stored (swept after the request ended)."""


__all__ = [
    "NoRendererUp",
    "RenderDedupeConflict",
    "RenderInputGone",
    "RenderNotRetryable",
    "RenderQueueFull",
    "RenderService",
    "RequestNotFound",
    "ScreenshotSpec",
]


class RenderService:
    """Render requests over a pool of renderers: the control plane's one entry point.

    A render request is the one unit of render work (`requests.py`): a screenshot is a
    one-page request (`submit`), a deck job's render a request of N pages (`decks`).
    Construction registers the cancel hook on `runtime` (cancelling a job cancels the requests
    it opened); `start()` (after `runtime.start()`) starts the supervisor, when there is one, and
    the coordinator's loops. With `supervise=None`, `settings.renderers` local renderers are
    spawned when `settings.renderer_urls` is empty; otherwise the configured renderers are used
    with `settings.renderer_secret`.
    """

    def __init__(
        self,
        db: Database,
        runtime: Runtime,
        settings: Settings,
        *,
        clock: Clock = SYSTEM_CLOCK,
        store: ArtifactStore | None = None,
        supervise: bool | None = None,
    ) -> None:
        self.db = db
        self.runtime = runtime
        self.settings = settings
        self.clock = clock
        self.store = store or ArtifactStore.from_settings(settings)
        self.sources = RendererSources()
        for source in configured_sources(settings.renderer_urls, settings.renderer_secret):
            self.sources.put(source)
        if supervise is None:
            supervise = not settings.renderer_urls and settings.renderers > 0
        self.coordinator = Coordinator(db, settings, self.sources, self.store, clock)
        self.supervisor: Supervisor | None = None
        if supervise:
            self.supervisor = Supervisor(
                settings,
                self.sources,
                clock,
                count=settings.renderers,
                on_change=self.coordinator.probe_loop.poke,
            )
        self.waiters = request_waiters(db, settings.render_idle_poll_ceiling_seconds)
        """Every wait for a request of this node, one-page or deck, shares it."""
        self.followers = RequestFollowers(db, settings.render_idle_poll_ceiling_seconds)
        """Every render event stream of this node shares it."""
        self.cancels = JobCancels(db, runtime, clock)
        self.decks = DeckRenders(
            db, runtime, settings, clock, self.store, self.waiters, self.cancels
        )
        runtime.on_cancel(self.cancels.cancel_hook)
        self.started = False
        self._forgetting: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        """Start the supervised renderers (waiting until they listen) and the coordinator."""
        if self.started:
            return
        if self.supervisor is not None:
            await self.supervisor.start()
        self.coordinator.start()
        self.started = True
        log.info(
            "render control plane started with loops: %s", ", ".join(lp.name for lp in self.loops)
        )

    async def stop(self) -> None:
        """Finish the deletes `forget_later` began, stop the coordinator, then the supervised
        renderers and their process groups, then the request waiters' reader."""
        if not self.started:
            return
        await asyncio.gather(*self._forgetting, return_exceptions=True)
        await self.coordinator.stop()
        if self.supervisor is not None:
            await self.supervisor.stop()
        await self.waiters.close()
        await self.followers.close()
        self.started = False

    @property
    def loops(self) -> list[Loop]:
        """Every background loop of the control plane, for `/readyz`."""
        supervised = self.supervisor.loops if self.supervisor is not None else []
        return self.coordinator.loops + supervised

    async def submit(
        self,
        spec: ScreenshotSpec,
        *,
        workspace_id: str,
        dedupe: bool = True,
        parent_job_id: int | None = None,
        timeout: float | None = None,
        capture: bool = True,
        needs_renderer: bool = False,
    ) -> RenderRequest:
        """Open a one-page render request for `spec`, or join the active one of the workspace
        for the same input (`dedupe`).

        Its deadline is `timeout` from now, at most `render_request_deadline_seconds`. With a
        `parent_job_id`, cancelling that job cancels the request, and a retry of the job takes
        back its earlier request for the same input. Without `capture` no picture is taken
        (the result is the diagnostics). Raises `RenderQueueFull` (code `RENDER_QUEUE_FULL`)
        when a queue limit is reached, and `NoRendererUp` when `needs_renderer` and no renderer
        is up; the checks and the insert share one transaction under the admission lock, so
        concurrent submissions cannot overshoot. A refused submission deletes the page it
        stored again, unless something else names it, so a stream of refusals leaves nothing
        in the store.
        """
        now = self.clock.now()
        seconds = self.settings.render_request_deadline_seconds
        if timeout is not None:
            seconds = min(timeout, seconds)
        opening = Opening(
            workspace_id=workspace_id,
            deadline_at=now + timedelta(seconds=seconds),
            dedupe=dedupe,
            parent_job_id=parent_job_id,
            capture=capture,
            needs_renderer=needs_renderer,
        )
        try:
            request, _created = await open_request(
                self.db, self.runtime, self.settings, self.store, spec, opening, now
            )
        except Exception:
            # The spec holds the page by value; the store has it under its content key.
            document = spec.render_input(capture=capture).get("document")
            keys = [document_key(document)] if isinstance(document, str) else []
            try:
                await documents_forget(self.db, self.store, keys)
            except Exception:
                log.warning("a refused render's page is left to the artefact sweep", exc_info=True)
            raise
        return request

    async def retry(self, request_id: int) -> RenderRequest:
        """Run a failed or cancelled one-page request again, under its id: a fresh attempt
        budget and deadline. Raises `RequestNotFound`, `RenderNotRetryable` (active, succeeded,
        or opened by a job, whose retry is the job's), `RenderInputGone`,
        `RenderDedupeConflict` and `RenderQueueFull`."""
        async with self.db.read_connection() as conn:
            before = await request_get(conn, request_id)
        if before is None:
            raise RequestNotFound(request_id)
        self._check_retryable(before)
        for key in document_keys(before.input or {}):
            if not await self.store.exists(document_object_key(key)):
                raise RenderInputGone(
                    f"render {request_id}'s page is no longer stored (the artefact sweep "
                    "deletes it once the render has ended); submit it again"
                )
        now = self.clock.now()
        deadline = now + timedelta(seconds=self.settings.render_request_deadline_seconds)

        async def run(conn: AsyncConnection) -> RenderRequest:
            await self.db.acquire_admission_lock(conn)
            current = await request_get(conn, request_id)
            if current is None:
                raise RequestNotFound(request_id)
            self._check_retryable(current)
            if current.dedupe_key is not None:
                holder = await request_active_by_dedupe(conn, current.dedupe_key)
                if holder is not None:
                    raise RenderDedupeConflict(
                        f"render {holder.id} is active for the same input; follow it instead",
                        holder.id,
                    )
            total, mine = await renders_queued(conn, current.workspace_id)
            queue_check(self.settings, current.workspace_id, total, mine)
            await request_retry(self.db, conn, request_id, deadline, now)
            after = await request_get(conn, request_id)
            assert after is not None
            return after

        return await self.db.write(run)

    @staticmethod
    def _check_retryable(request: RenderRequest) -> None:
        if request.parent_job_id is not None or request.is_deck:
            raise RenderNotRetryable(
                f"render {request.id} belongs to job {request.parent_job_id}; retry the job"
            )
        if request.status not in (RequestStatus.FAILED, RequestStatus.CANCELLED):
            raise RenderNotRetryable(
                f"render {request.id} is {request.status.value}; only a failed or cancelled "
                "render can be retried"
            )

    async def cancel_request(self, request_id: int) -> None:
        """Cancel a request (pending: now; running: asked); nothing once it has ended."""
        async with self.db.write_transaction() as conn:
            await request_cancel(self.db, conn, request_id, self.clock.now())

    async def forget_request(self, request: RenderRequest, documents: Sequence[str] = ()) -> None:
        """Delete a finished request nobody keeps (a validation's): artefact, attempts, row,
        and those of its `documents` (content keys, `requests.py`) no other request names.

        A validation's page is an input nobody keeps: left to the artefact sweep, every
        `POST /v1/validate` would hold its document in the store for hours. One left to the
        sweep instead: a document another request stored but has not yet committed its row
        for (milliseconds), which that request then sends by value from the renderer's cache
        or, should the renderer restart in between, fails as a lost input (retried, refused).
        """
        if not request.is_terminal:
            return
        if request.artifact_key is not None:
            await self.store.delete(request.artifact_key)
        await request_forget(self.db, request.id)
        await documents_forget(self.db, self.store, documents)

    def forget_later(self, request: RenderRequest, documents: Sequence[str] = ()) -> None:
        """`forget_request` in the background, so the caller answers first (a validation's
        answer does not wait for the delete); `stop` waits for it. A process that dies first
        leaves the rows to retention and the documents to the sweep, as a validation whose
        wait ran out does."""
        task = asyncio.create_task(
            self.forget_request(request, documents), name=f"forget:{request.id}"
        )
        self._forgetting.add(task)
        task.add_done_callback(self._forgotten)

    def _forgotten(self, task: asyncio.Task[None]) -> None:
        self._forgetting.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("deleting a finished render request failed", exc_info=task.exception())

    async def request_for_job(self, job_id: int) -> RenderRequest | None:
        """The newest render request opened by a job, if any."""
        async with self.db.read_connection() as conn:
            return await request_latest_of_job(conn, job_id)

    async def request(self, request_id: int) -> RenderRequest | None:
        """One render request."""
        async with self.db.read_connection() as conn:
            return await request_get(conn, request_id)

    async def of_workspace(
        self, workspace_id: str, *, before_id: int | None = None, limit: int = 50
    ) -> list[RenderRequest]:
        """The workspace's render requests (without their input), newest first."""
        async with self.db.read_connection() as conn:
            return await requests_of_workspace(conn, workspace_id, before_id=before_id, limit=limit)

    async def kept_finished_after(
        self, after: tuple[datetime, int], workspace_ids: Sequence[str], limit: int
    ) -> list[RenderRequest]:
        """Ended screenshots no job opened, past `after` (finished_at, id), oldest first: what
        the webhook relay announces as `render.finished`."""
        async with self.db.read_connection() as conn:
            return await requests_kept_finished_after(conn, after, workspace_ids, limit)

    async def pages(self, request_id: int) -> list[RenderPage]:
        """Every page of a deck request, in page order."""
        async with self.db.read_connection() as conn:
            return await pages_of_request(conn, request_id)

    async def attempts(self, request_id: int) -> list[RenderAttempt]:
        """Every attempt of a render request, oldest first."""
        async with self.db.read_connection() as conn:
            return await attempts_of_request(conn, request_id)

    async def artifact(self, request: RenderRequest) -> bytes | None:
        """The committed artefact of a one-page request; None without one (or once pruned)."""
        if request.artifact_key is None:
            return None
        return await self.store.get(request.artifact_key)

    async def artifact_for_job(self, job_id: int) -> tuple[bytes, str] | None:
        """The bytes and content type of a job's stored output (a `deck.export`'s), or None
        without one."""
        job = await self.runtime.get(job_id)
        if job is None or not isinstance(job.result, dict):
            return None
        key = job.result.get("artifact_key")
        if not isinstance(key, str):
            return None
        data = await self.store.get(key)
        if data is None:
            return None
        return data, str(job.result.get("content_type") or "application/octet-stream")

    async def renderers(self) -> list[dict[str, Any]]:
        """Every known renderer: id, url, epoch, slots, occupancy, state and drain."""
        async with self.db.read_transaction() as conn:
            rows = await renderer_list(conn)
            occ = await occupancy_snapshot(conn)
        return [
            {
                "id": r.id,
                "name": r.name,
                "url": r.url,
                "renderer_id": r.renderer_id,
                "epoch": r.epoch,
                "slots": r.slots,
                "occupancy": len(occ.taken.get((r.id, r.epoch or ""), ())),
                "state": r.state.value,
                "draining_since": r.draining_since.isoformat() if r.draining_since else None,
                "error": r.error,
                "updated_at": r.updated_at.isoformat(),
            }
            for r in rows
        ]

    async def wait_for_terminal(
        self, request_id: int, timeout: float | None = None
    ) -> RenderRequest:
        """Wait until the render request is terminal; woken by its state change, never writes."""
        return await wait_for_terminal(self.waiters, request_id, timeout)
