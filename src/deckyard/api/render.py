"""Render routes: ad-hoc screenshots as jobs, job artefacts, and the renderers."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client.core import CounterMetricFamily, Metric

from deckyard.api.auth import Principal, current_principal
from deckyard.api.errors import ApiError
from deckyard.api.jobs import JobOut, owned_job
from deckyard.api.params import RowId
from deckyard.render.control.service import RenderQueueFull, RenderService, ScreenshotSpec

router = APIRouter(tags=["render"])
Caller = Annotated[Principal, Depends(current_principal)]


def render_service(request: Request) -> RenderService:
    """The app's render control plane; 503 when this instance runs without one."""
    service: RenderService | None = getattr(request.app.state, "render", None)
    if service is None:
        raise ApiError(503, "RENDER_SERVICE_UNAVAILABLE", "this instance runs no render service")
    return service


def render_metrics(service: RenderService | None) -> Callable[[], Iterator[Metric]]:
    """A `/metrics` source: renderer names that two processes answered to (issue 14, item 4)."""

    def collect() -> Iterator[Metric]:
        if service is None:
            return
        clashes = CounterMetricFamily(
            "deckyard_render_name_clashes",
            "Probes that found one renderer name answered by two renderers (epochs alternating).",
        )
        clashes.add_metric([], service.coordinator.name_clashes)
        yield clashes

    return collect


def queue_full(exc: RenderQueueFull) -> ApiError:
    """The 429 answer for a full render queue."""
    return ApiError(
        429,
        "RENDER_QUEUE_FULL",
        str(exc),
        headers={"Retry-After": str(max(1, round(exc.retry_after)))},
    )


@router.post(
    "/v1/screenshots",
    status_code=202,
    response_model=JobOut,
    responses={
        429: {
            "description": "`RENDER_QUEUE_FULL`: the render queue is at its limit; retry "
            "after `Retry-After`."
        }
    },
)
async def create_screenshot(
    request: Request,
    principal: Caller,
    spec: ScreenshotSpec,
    dedupe: Annotated[bool, Query(description="Join an active job for the same input.")] = True,
) -> JSONResponse:
    """Screenshot ad-hoc HTML or a URL as a durable job; poll it or follow its events."""
    service = render_service(request)
    try:
        job = await service.screenshot(spec, workspace_id=principal.workspace_id, dedupe=dedupe)
    except RenderQueueFull as exc:
        raise queue_full(exc) from None
    return JSONResponse(
        JobOut.of(job).model_dump(mode="json"),
        status_code=202,
        headers={"Location": f"/v1/jobs/{job.id}"},
    )


@router.get("/v1/jobs/{job_id:int}/artifact", response_class=Response)
async def job_artifact(request: Request, principal: Caller, job_id: RowId) -> Response:
    """The artefact (PNG, JPEG, WebP or PDF) a finished job produced."""
    job = await owned_job(request, principal, job_id, payload=False)
    found = await render_service(request).artifact_for_job(job.id)
    if found is None:
        state = "has not finished" if not job.is_terminal else "has no artefact"
        raise ApiError(404, "NO_ARTIFACT", f"job {job_id} {state}")
    data, content_type = found
    sha = (job.result or {}).get("sha256") if isinstance(job.result, dict) else None
    headers = {"X-Deckyard-Sha256": sha} if sha else {}
    return Response(data, media_type=content_type, headers=headers)


@router.get("/v1/renderers")
async def list_renderers(request: Request, principal: Caller) -> list[dict[str, Any]]:
    """Renderers with their slots, occupancy, epoch and state."""
    return await render_service(request).renderers()
