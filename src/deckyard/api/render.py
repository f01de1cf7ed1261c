"""Render routes: job artefacts and the renderers (render requests are `renders.py`'s)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response
from prometheus_client.core import CounterMetricFamily, Metric
from pydantic import BaseModel, Field

from deckyard.api.auth import Principal, TokenRole, current_principal
from deckyard.api.errors import ApiError
from deckyard.api.jobs import owned_job
from deckyard.api.params import RowId
from deckyard.render.control.models import RendererState
from deckyard.render.control.service import RenderQueueFull, RenderService

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


@router.get("/v1/jobs/{job_id:int}/artifact", response_class=Response)
async def job_artifact(request: Request, principal: Caller, job_id: RowId) -> Response:
    """The artefact (PNG, JPEG, WebP, PDF, site ZIP or PPTX) a finished job produced."""
    job = await owned_job(request, principal, job_id, payload=False)
    found = await render_service(request).artifact_for_job(job.id)
    if found is None:
        state = "has not finished" if not job.is_terminal else "has no artefact"
        raise ApiError(404, "NO_ARTIFACT", f"job {job_id} {state}")
    data, content_type = found
    sha = (job.result or {}).get("sha256") if isinstance(job.result, dict) else None
    headers = {"X-Deckyard-Sha256": sha} if sha else {}
    return Response(data, media_type=content_type, headers=headers)


class RendererOut(BaseModel):
    """A renderer as the control plane last saw it."""

    id: int = Field(description="The id `POST /v1/renderers/{id}/drain` takes.")
    name: str
    url: str
    renderer_id: str | None
    epoch: str | None = Field(description="Changes with every start of the renderer process.")
    slots: int
    occupancy: int = Field(description="Slots its attempts hold now.")
    state: RendererState = Field(
        description="`up`: takes attempts. `down`: did not answer its last probe. `draining`: "
        "takes no new attempts while its in-flight ones finish (SIGTERM, or a drain through "
        "this API), then exits. `drained`: a draining renderer that stopped answering; its "
        "replacement (a new epoch under the same name) is `up` again."
    )
    draining_since: datetime | None = Field(
        description="When the drain of its current epoch began; null unless draining or drained."
    )
    error: str | None
    updated_at: datetime


@router.get("/v1/renderers", response_model=list[RendererOut])
async def list_renderers(request: Request, principal: Caller) -> list[RendererOut]:
    """Renderers with their slots, occupancy, epoch, state and drain."""
    return [RendererOut(**r) for r in await render_service(request).renderers()]


@router.post(
    "/v1/renderers/{renderer_id}/drain",
    status_code=202,
    response_model=RendererOut,
    responses={
        403: {"description": "`ROLE_FORBIDDEN`: draining a renderer needs an admin token."},
        404: {"description": "`NOT_FOUND`: no renderer has that id."},
    },
)
async def drain_renderer(request: Request, principal: Caller, renderer_id: RowId) -> RendererOut:
    """Drain a renderer: no node admits new attempts to it from now on; its in-flight pages
    finish (within the renderer's `renderer_drain_timeout_seconds`; what still runs then is
    retried elsewhere without counting as an attempt), then it exits, and a supervised one is
    replaced at once (a rolling restart). Asking again changes nothing; the answer is the
    renderer, `draining` (or `drained` when it was down)."""
    if principal.role is not TokenRole.ADMIN:
        raise ApiError(
            403, "ROLE_FORBIDDEN", f"draining a renderer needs an admin token, not {principal.role}"
        )
    service = render_service(request)
    if await service.coordinator.drain(renderer_id) is None:
        raise ApiError(404, "NOT_FOUND", f"no renderer {renderer_id}")
    found = [r for r in await service.renderers() if r["id"] == renderer_id]
    return RendererOut(**found[0])
