"""`RenderService`: the render control plane's facade for the API and `deckyard serve`."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.artifacts import ArtifactStore
from deckyard.clock import SYSTEM_CLOCK, Clock
from deckyard.config import Settings
from deckyard.db import Database
from deckyard.jobs import Job, Runtime
from deckyard.loop import Loop
from deckyard.render.control.client import RendererSources, configured_sources
from deckyard.render.control.coordinator import Coordinator, RenderQueueFull, queue_check
from deckyard.render.control.deck_requests import DeckRenders
from deckyard.render.control.inputs import document_keys
from deckyard.render.control.models import (
    SCREENSHOT_KIND,
    RenderAttempt,
    RenderPage,
    RenderRequest,
    ScreenshotSpec,
)
from deckyard.render.control.screenshots import (
    RENDER_QUEUE,
    ScreenshotHandler,
    documents_forget,
    open_direct,
    request_forget,
    screenshot_payload,
    wait_for_terminal,
)
from deckyard.render.control.store import (
    attempts_of_request,
    occupancy_snapshot,
    renderer_list,
    request_cancel,
    request_get,
    request_latest_of_job,
)
from deckyard.render.control.store_pages import pages_of_request, pages_queued
from deckyard.render.control.supervisor import Supervisor

log = logging.getLogger(__name__)

__all__ = ["RenderQueueFull", "RenderService", "ScreenshotSpec"]


class RenderService:
    """Screenshots as durable jobs over a pool of renderers: the control plane's one entry point.

    Construction registers the `screenshot` job handler (queue `render`) and the cancel hook on
    `runtime`; `start()` (after `runtime.start()`) starts the supervisor, when there is one, and
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
        self.handler = ScreenshotHandler(db, runtime, settings, clock, self.store)
        self.decks = DeckRenders(db, runtime, settings, clock, self.handler)
        runtime.handler(
            SCREENSHOT_KIND,
            queue=RENDER_QUEUE,
            max_attempts=settings.render_job_max_attempts,
        )(self.handler)
        runtime.on_cancel(self.handler.cancel_hook)
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
        await self.handler.waiters.close()
        self.started = False

    @property
    def loops(self) -> list[Loop]:
        """Every background loop of the control plane, for `/readyz`."""
        supervised = self.supervisor.loops if self.supervisor is not None else []
        return self.coordinator.loops + supervised

    async def screenshot(
        self,
        spec: ScreenshotSpec,
        *,
        workspace_id: str,
        dedupe: bool = True,
        parent_id: int | None = None,
    ) -> Job:
        """Enqueue a screenshot job, or return the active one for the same target and config.

        Raises `RenderQueueFull` (code `RENDER_QUEUE_FULL`) when the global or the workspace's
        queue limit is reached; the check and the enqueue share one transaction under the
        admission lock, so concurrent submissions cannot overshoot the limit.

        The page is stored by its content key first and the payload names it
        (`screenshot_payload`); a refused submission deletes it again, unless something else
        names it, so a stream of refused screenshots leaves nothing in the store.
        """
        payload, digest = await screenshot_payload(self.store, spec, dedupe=dedupe)

        async def admit(conn: AsyncConnection) -> Job:
            await self.db.acquire_admission_lock(conn)
            total, mine = await self.runtime.active_count(SCREENSHOT_KIND, workspace_id, conn=conn)
            pages, my_pages = await pages_queued(conn, workspace_id)
            queue_check(self.settings, workspace_id, total + pages, mine + my_pages)
            return await self.runtime.enqueue(
                SCREENSHOT_KIND,
                payload,
                queue=RENDER_QUEUE,
                dedupe_key=f"screenshot:{workspace_id}:{digest}" if dedupe else None,
                workspace_id=workspace_id,
                parent_id=parent_id,
                conn=conn,
            )

        try:
            return await self.db.write(admit)
        except Exception:
            try:
                await documents_forget(self.db, self.store, document_keys(payload["render"]))
            except Exception:
                log.warning(
                    "a refused screenshot's page is left to the artefact sweep", exc_info=True
                )
            raise

    async def screenshot_direct(
        self, spec: ScreenshotSpec, *, workspace_id: str, timeout: float, capture: bool = True
    ) -> RenderRequest | None:
        """Open a render request for `spec` without a job, or None when no renderer is up.

        For a render the caller waits for and then forgets (`POST /v1/validate`): no job to
        claim, finish and wake. Its deadline is `timeout` from now (at most the usual request
        deadline). Without `capture` no picture is taken (the result is the diagnostics).
        Raises `RenderQueueFull` like `screenshot`.
        """
        now = self.clock.now()
        seconds = min(timeout, self.settings.render_request_deadline_seconds)
        return await open_direct(
            self.db,
            self.runtime,
            self.settings,
            self.store,
            spec,
            workspace_id=workspace_id,
            deadline_at=now + timedelta(seconds=seconds),
            now=now,
            capture=capture,
        )

    async def cancel_request(self, request_id: int) -> None:
        """Cancel a request opened by `screenshot_direct` (pending: now; running: asked)."""
        async with self.db.write_transaction() as conn:
            await request_cancel(self.db, conn, request_id, self.clock.now())

    async def forget_request(self, request: RenderRequest, documents: Sequence[str] = ()) -> None:
        """Delete a finished request opened by `screenshot_direct`: artefact, attempts, row,
        and those of its `documents` (content keys, `inputs.py`) no other request names.

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

    async def pages(self, request_id: int) -> list[RenderPage]:
        """Every page of a deck request, in page order."""
        async with self.db.read_connection() as conn:
            return await pages_of_request(conn, request_id)

    async def attempts(self, request_id: int) -> list[RenderAttempt]:
        """Every attempt of a render request, oldest first."""
        async with self.db.read_connection() as conn:
            return await attempts_of_request(conn, request_id)

    async def artifact_for_job(self, job_id: int) -> tuple[bytes, str] | None:
        """The bytes and content type of a job's committed result, or None without one."""
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
        return await wait_for_terminal(self.handler.waiters, request_id, timeout)
