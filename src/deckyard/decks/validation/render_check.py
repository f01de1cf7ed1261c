"""Renders through the control plane with a bounded wait, and maps the outcome to a render stage.

Rule Q0 lives here on the service side: no live renderer, a render request that failed with an
infrastructure code, or a wait that ran out all make the render stage `unavailable`; only a
content error code or the renderer's own diagnostics can make it `failed`.

With a `cache` (`deckyard render` sets one: `RenderResultCache`), a render whose input was
rendered before, by the same code, Chromium, fonts and renderer settings, takes that result
and its bytes instead of a render request; a succeeded render is kept for the next run.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import Any

from deckyard.decks.validation.result import StageOutcome
from deckyard.decks.validation.rules import (
    render_outcome_from_diagnostics,
    render_outcome_from_error,
)
from deckyard.jobs import JobContext, Runtime, slot_released
from deckyard.render.control.deck_requests import PageRender
from deckyard.render.control.models import RendererState, RequestStatus, ScreenshotSpec
from deckyard.render.control.requests import document_keys
from deckyard.render.control.result_cache import RenderResultCache
from deckyard.render.control.service import NoRendererUp, RenderQueueFull, RenderService
from deckyard.render.protocol import RenderErrorCode

UNAVAILABLE = "no renderer is up; start one (deckyard serve --renderers 1) and retry"


@dataclass(frozen=True)
class RenderOutcome:
    """How one render ended: the render request's id and committed result, or an error code
    and message."""

    request_id: int | None
    error_code: str | None = None
    message: str | None = None
    request_result: dict[str, Any] | None = None

    @property
    def result(self) -> dict[str, Any]:
        """The request's result (artefact key, content type, size, sha256, diagnostics)."""
        return self.request_result or {}

    def stage(self, *, accessibility_errors: bool = False) -> StageOutcome:
        """The render stage of a validation for this outcome."""
        if self.error_code is not None:
            return render_outcome_from_error(self.error_code, self.message)
        return render_outcome_from_diagnostics(
            self.result.get("diagnostics") or {}, accessibility_errors=accessibility_errors
        )


class RenderGateway:
    """Opens render requests on the render control plane and waits for them, bounded."""

    def __init__(self, render: RenderService, runtime: Runtime) -> None:
        self.render = render
        self.runtime = runtime
        self.cache: RenderResultCache | None = None
        """Render results kept across runs (`deckyard render` sets it; a server has none)."""

    async def renderer_live(self) -> bool:
        """Whether at least one renderer answered its last probe."""
        renderers = await self.render.renderers()
        return any(r["state"] == RendererState.UP.value for r in renderers)

    async def run(
        self,
        spec: ScreenshotSpec,
        *,
        workspace_id: str,
        parent_id: int | None,
        timeout: float,
        keep_artifact: bool = True,
    ) -> RenderOutcome:
        """Render `spec` as one render request and wait at most `timeout` seconds.

        The request is opened for the calling job (`parent_id`): never shared with another
        caller, cancelled with the job, taken back by a retry of the job for the same input.
        A wait that runs out or is cancelled cancels the request. When `keep_artifact` is false
        no picture is taken and the request is deleted once answered (`forget_later`): a
        check nobody keeps leaves no rows and no document behind.
        Inside a job handler the wait gives the handler's worker slot back (`slot_released`),
        so deck jobs waiting for their renders never keep other jobs from running.
        """
        cached = await self._cached(spec, workspace_id) if keep_artifact else None
        if cached is not None:
            return RenderOutcome(None, request_result=cached)
        try:
            request = await self.render.submit(
                spec,
                workspace_id=workspace_id,
                dedupe=False,
                parent_job_id=parent_id if keep_artifact else None,
                timeout=timeout,
                capture=keep_artifact,
                needs_renderer=True,
            )
        except RenderQueueFull as exc:
            return RenderOutcome(None, exc.code.value, str(exc))
        except NoRendererUp:
            return RenderOutcome(None, RenderErrorCode.SERVICE_UNAVAILABLE.value, UNAVAILABLE)
        try:
            async with slot_released():
                done = await self.render.wait_for_terminal(request.id, timeout=timeout)
        except TimeoutError:
            await asyncio.shield(self.render.cancel_request(request.id))
            return RenderOutcome(
                request.id,
                RenderErrorCode.DEADLINE_EXCEEDED.value,
                f"the renderer did not answer within {timeout:g} s",
            )
        except asyncio.CancelledError:
            await asyncio.shield(self.render.cancel_request(request.id))
            raise
        if not keep_artifact:
            self.render.forget_later(done, document_keys(request.input))
        if done.status is RequestStatus.SUCCEEDED and isinstance(done.result, dict):
            if keep_artifact:
                await self._keep(spec, done.result)
            return RenderOutcome(done.id, request_result={"request_id": done.id, **done.result})
        code = done.error_code or RenderErrorCode.RESULT_LOST.value
        return RenderOutcome(done.id, code, done.error_message or code)

    async def render_pages(
        self, ctx: JobContext, specs: list[ScreenshotSpec], workspace_id: str
    ) -> list[PageRender]:
        """Render `specs` as one deck request of `ctx`'s job, each page's outcome in order;
        pages the cache holds are not in the request (none is opened when it holds them all)."""
        pages: list[PageRender | None] = []
        for index, spec in enumerate(specs):
            cached = await self._cached(spec, workspace_id)
            pages.append(PageRender(index, cached) if cached is not None else None)
        todo = [i for i, page in enumerate(pages) if page is None]
        if todo:
            rendered = await self.render.decks.render(ctx, [specs[i] for i in todo])
            for index, page in zip(todo, rendered, strict=True):
                pages[index] = PageRender(index, page.result, page.error_code, page.message)
                if page.error_code is None and page.result:
                    await self._keep(specs[index], page.result)
        return [page for page in pages if page is not None]

    async def _cached(self, spec: ScreenshotSpec, workspace_id: str) -> dict[str, Any] | None:
        """A kept result of `spec`, its bytes stored afresh for this run; None without one."""
        if self.cache is None:
            return None
        found = await self.cache.get(spec)
        if found is None:
            return None
        result: dict[str, Any] = {**found.result, "cached": True}
        if found.data is not None:
            key = f"renders/{workspace_id}/cached-{uuid.uuid4().hex[:16]}.{result['format']}"
            await self.render.store.put(key, found.data)
            result["artifact_key"] = key
        return result

    async def _keep(self, spec: ScreenshotSpec, result: dict[str, Any]) -> None:
        """Keep a succeeded render's result and bytes for later runs (with a cache)."""
        if self.cache is None:
            return
        key = result.get("artifact_key")
        data = await self.render.store.get(key) if isinstance(key, str) else None
        if isinstance(key, str) and data is None:
            return
        await self.cache.put(spec, result, data)
