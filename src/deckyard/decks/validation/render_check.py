"""Renders through the control plane with a bounded wait, and maps the outcome to a render stage.

Rule Q0 lives here on the service side: no live renderer, a render job that failed with an
infrastructure code, or a wait that ran out all make the render stage `unavailable`; only a
content error code or the renderer's own diagnostics can make it `failed`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from deckyard.decks.validation.result import StageOutcome
from deckyard.decks.validation.rules import (
    render_outcome_from_diagnostics,
    render_outcome_from_error,
)
from deckyard.jobs import Job, JobStatus, Runtime, slot_released
from deckyard.render.control.inputs import document_keys
from deckyard.render.control.models import RendererState, RequestStatus, ScreenshotSpec
from deckyard.render.control.service import RenderQueueFull, RenderService
from deckyard.render.protocol import RenderErrorCode


@dataclass(frozen=True)
class RenderOutcome:
    """How one render ended: the finished screenshot job (or, for a render nobody keeps, the
    request's result), or an error code and message."""

    job: Job | None
    error_code: str | None = None
    message: str | None = None
    request_result: dict[str, Any] | None = None

    @property
    def result(self) -> dict[str, Any]:
        """The screenshot job's result (artefact key, content type, size, sha256, diagnostics)."""
        if self.job is None or not isinstance(self.job.result, dict):
            return self.request_result or {}
        return self.job.result

    def stage(self, *, accessibility_errors: bool = False) -> StageOutcome:
        """The render stage of a validation for this outcome."""
        if self.error_code is not None:
            return render_outcome_from_error(self.error_code, self.message)
        return render_outcome_from_diagnostics(
            self.result.get("diagnostics") or {}, accessibility_errors=accessibility_errors
        )


class RenderGateway:
    """Submits screenshot jobs to the render control plane and waits for them, bounded."""

    def __init__(self, render: RenderService, runtime: Runtime) -> None:
        self.render = render
        self.runtime = runtime

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
        """Render `spec` as a child screenshot job and wait at most `timeout` seconds.

        The job is never shared (no dedupe), so cancelling it when the wait runs out, or
        deleting it with its artefact and render requests once it ended when `keep_artifact`
        is false, affects nobody else. (A job cancelled because the wait ran out may still be
        ending; its rows are left to pruning.)
        Inside a job handler the wait gives the handler's worker slot back (`slot_released`),
        so deck jobs waiting for their screenshots never keep those screenshots from running.
        """
        if not keep_artifact:
            return await self._run_unkept(spec, workspace_id=workspace_id, timeout=timeout)
        if not await self.renderer_live():
            return RenderOutcome(
                None,
                RenderErrorCode.SERVICE_UNAVAILABLE.value,
                "no renderer is up; start one (deckyard serve --renderers 1) and retry",
            )
        try:
            job = await self.render.screenshot(
                spec, workspace_id=workspace_id, dedupe=False, parent_id=parent_id
            )
        except RenderQueueFull as exc:
            return RenderOutcome(None, exc.code.value, str(exc))
        try:
            # Called from a job handler (a deck job, an AI job), the wait holds no worker slot.
            async with slot_released():
                done = await self.runtime.wait(job.id, timeout=timeout)
        except TimeoutError:
            await asyncio.shield(self.runtime.cancel(job.id))
            return RenderOutcome(
                None,
                RenderErrorCode.DEADLINE_EXCEEDED.value,
                f"the renderer did not answer within {timeout:g} s",
            )
        if done.status == JobStatus.SUCCEEDED:
            return RenderOutcome(done)
        code = done.error_code or RenderErrorCode.RESULT_LOST.value
        return RenderOutcome(done, code, done.error_message)

    async def _run_unkept(
        self, spec: ScreenshotSpec, *, workspace_id: str, timeout: float
    ) -> RenderOutcome:
        """Check `spec` in a render request without a job and without a picture, wait, then
        delete the request.

        Nobody keeps the picture, so there is no job to claim, finish and wake: one insert, the
        coordinator's usual admission, attempts, fenced result and deadline, one delete that the
        answer does not wait for (`forget_later`). A wait that runs out or is cancelled (the
        client went away) cancels the request; its rows are then left to pruning, as it may
        still be ending.
        """
        unavailable = RenderOutcome(
            None,
            RenderErrorCode.SERVICE_UNAVAILABLE.value,
            "no renderer is up; start one (deckyard serve --renderers 1) and retry",
        )
        try:
            request = await self.render.screenshot_direct(
                spec, workspace_id=workspace_id, timeout=timeout, capture=False
            )
        except RenderQueueFull as exc:
            return RenderOutcome(None, exc.code.value, str(exc))
        if request is None:
            return unavailable
        try:
            done = await self.render.wait_for_terminal(request.id, timeout=timeout)
        except TimeoutError:
            await asyncio.shield(self.render.cancel_request(request.id))
            return RenderOutcome(
                None,
                RenderErrorCode.DEADLINE_EXCEEDED.value,
                f"the renderer did not answer within {timeout:g} s",
            )
        except asyncio.CancelledError:
            await asyncio.shield(self.render.cancel_request(request.id))
            raise
        self.render.forget_later(done, document_keys(request.input))
        if done.status is RequestStatus.SUCCEEDED and isinstance(done.result, dict):
            return RenderOutcome(None, request_result=done.result)
        code = done.error_code or RenderErrorCode.RESULT_LOST.value
        return RenderOutcome(None, code, done.error_message or code)
