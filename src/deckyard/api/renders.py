"""Render requests as a resource: `POST /v1/screenshots` opens one, `/v1/renders/{id}` shows it.

A render request is the unit of render work (`render/control/requests.py`): no job wraps a
screenshot. It has what a job had: its state and attempts, events (SSE), cancel, retry, a
deadline, a dedupe key (`?dedupe=true` joins the workspace's active request for the same
input), `Idempotency-Key` (on every POST) and the render queue's limits.

The app's render service (`render_service`, 503 without one) and the queue-full answer live here
too, with the rest of the render routes (`renderers_router`, tagged `render`): a finished job's
artefact and the renderers (list, drain).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi.responses import JSONResponse
from fastapi.sse import EventSourceResponse, ServerSentEvent
from prometheus_client.core import CounterMetricFamily, Metric
from pydantic import BaseModel, Field

from deckyard.api.auth import Principal, TokenRole, current_principal
from deckyard.api.errors import ApiError
from deckyard.api.jobs import nothing_to_cancel, owned_job
from deckyard.api.params import BeforeId, RowId, bounded_id
from deckyard.render.control.models import (
    RendererState,
    RenderRequest,
    RequestStatus,
)
from deckyard.render.control.service import (
    RenderDedupeConflict,
    RenderInputGone,
    RenderNotRetryable,
    RenderQueueFull,
    RenderService,
    RequestNotFound,
    ScreenshotSpec,
)

router = APIRouter(tags=["renders"])
renderers_router = APIRouter(tags=["render"])
Caller = Annotated[Principal, Depends(current_principal)]

RESULT_FIELDS = ("content_type", "size", "sha256", "diagnostics", "render_ms")


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


class RenderLinks(BaseModel):
    """Where to follow the render."""

    self: str
    events: str
    artifact: str


class RenderOut(BaseModel):
    """A render request as the API shows it."""

    id: int
    kind: str = Field(description="`screenshot` (one page) or `deck` (a deck job's pages).")
    status: RequestStatus
    attempts: int = Field(description="Render attempts made so far.")
    max_attempts: int
    deadline_at: datetime = Field(description="The render fails past it, whatever its attempts.")
    cancel_requested_at: datetime | None
    result: dict[str, Any] | None = Field(
        description="Once succeeded: `content_type`, `size`, `sha256`, `diagnostics`."
    )
    error_code: str | None
    error_message: str | None
    job_id: int | None = Field(description="The job that opened it (a deck job), if any.")
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    links: RenderLinks

    @classmethod
    def of(cls, request: RenderRequest) -> RenderOut:
        """The API view of a render request."""
        result = request.result if isinstance(request.result, dict) else None
        base = f"/v1/renders/{request.id}"
        return cls(
            id=request.id,
            kind=request.kind,
            status=request.status,
            attempts=request.attempts,
            max_attempts=request.max_attempts,
            deadline_at=request.deadline_at,
            cancel_requested_at=request.cancel_requested_at,
            result={k: result[k] for k in RESULT_FIELDS if k in result} if result else None,
            error_code=request.error_code,
            error_message=request.error_message,
            job_id=request.parent_job_id,
            created_at=request.created_at,
            updated_at=request.updated_at,
            finished_at=request.finished_at,
            links=RenderLinks(self=base, events=f"{base}/events", artifact=f"{base}/artifact"),
        )


def answer(request: RenderRequest, status_code: int = 200) -> JSONResponse:
    """The render as JSON, with its `Location`."""
    return JSONResponse(
        RenderOut.of(request).model_dump(mode="json"),
        status_code=status_code,
        headers={"Location": f"/v1/renders/{request.id}"},
    )


async def owned_render(request: Request, principal: Principal, render_id: int) -> RenderRequest:
    """The caller's workspace's render `render_id`, or 404."""
    found = await render_service(request).request(render_id)
    if found is None or found.workspace_id != principal.workspace_id:
        raise ApiError(404, "NOT_FOUND", f"no render {render_id}")
    return found


async def render_of_caller(request: Request, principal: Caller, render_id: RowId) -> RenderRequest:
    """Dependency: the caller's render from the path."""
    return await owned_render(request, principal, render_id)


@router.post(
    "/v1/screenshots",
    status_code=202,
    response_model=RenderOut,
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
    dedupe: Annotated[
        bool, Query(description="Join the workspace's active render of the same input.")
    ] = True,
) -> JSONResponse:
    """Screenshot ad-hoc HTML or a URL: a render request (`/v1/renders/{id}`); follow its
    events, then fetch its artefact."""
    service = render_service(request)
    try:
        created = await service.submit(spec, workspace_id=principal.workspace_id, dedupe=dedupe)
    except RenderQueueFull as exc:
        raise queue_full(exc) from None
    return answer(created, 202)


class RenderList(BaseModel):
    """A page of renders, newest first; pass `next_before` as `before` for the next page."""

    renders: list[RenderOut]
    next_before: int | None


@router.get("/v1/renders", response_model=RenderList)
async def list_renders(
    request: Request,
    principal: Caller,
    before: BeforeId = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> RenderList:
    """Render requests of the caller's workspace, newest first (finished ones until
    retention prunes them)."""
    found = await render_service(request).of_workspace(
        principal.workspace_id, before_id=before, limit=limit
    )
    return RenderList(
        renders=[RenderOut.of(r) for r in found],
        next_before=found[-1].id if len(found) == limit else None,
    )


@router.get("/v1/renders/{render_id:int}", response_model=RenderOut)
async def get_render(
    render: Annotated[RenderRequest, Depends(render_of_caller)],
) -> RenderOut:
    """One render request."""
    return RenderOut.of(render)


@router.get(
    "/v1/renders/{render_id:int}/artifact",
    response_class=Response,
    responses={404: {"description": "`NO_ARTIFACT`: the render has not succeeded (yet)."}},
)
async def render_artifact(
    request: Request, render: Annotated[RenderRequest, Depends(render_of_caller)]
) -> Response:
    """The picture (PNG, JPEG, WebP) or PDF a succeeded render made."""
    data = await render_service(request).artifact(render)
    if data is None or not isinstance(render.result, dict):
        state = "has not finished" if not render.is_terminal else "has no artefact"
        raise ApiError(404, "NO_ARTIFACT", f"render {render.id} {state}")
    content_type = str(render.result.get("content_type") or "application/octet-stream")
    sha = render.result.get("sha256")
    headers = {"X-Deckyard-Sha256": str(sha)} if sha else {}
    return Response(data, media_type=content_type, headers=headers)


@router.post(
    "/v1/renders/{render_id:int}/cancel",
    response_model=RenderOut,
    responses={409: {"description": "`RENDER_FINISHED`: the render already ended."}},
)
async def cancel_render(request: Request, principal: Caller, render_id: RowId) -> RenderOut:
    """Cancel a render: a queued one ends now, a running one is stopped. Cancelling a
    cancelled render answers it unchanged."""
    before = await owned_render(request, principal, render_id)
    service = render_service(request)
    if before.is_terminal and before.status is not RequestStatus.CANCELLED:
        raise finished(before)
    await service.cancel_request(render_id)
    after = await owned_render(request, principal, render_id)
    if after.is_terminal and after.status is not RequestStatus.CANCELLED:
        raise finished(after)
    return RenderOut.of(after)


def finished(render: RenderRequest) -> ApiError:
    """409: the render ended before a cancel could reach it."""
    return nothing_to_cancel("RENDER_FINISHED", "render", render.id, render.status.value)


@router.post(
    "/v1/renders/{render_id:int}/retry",
    response_model=RenderOut,
    responses={
        409: {
            "description": "`RENDER_NOT_RETRYABLE`: the render is active or succeeded, or a "
            "job opened it (retry the job); `DEDUPE_CONFLICT`: another active render "
            "(`render_id`) has the same input."
        },
        410: {"description": "`RENDER_INPUT_GONE`: its page is no longer stored."},
        429: {"description": "`RENDER_QUEUE_FULL`: the render queue is at its limit."},
    },
)
async def retry_render(request: Request, principal: Caller, render_id: RowId) -> RenderOut:
    """Run a failed or cancelled render again, under the same id."""
    await owned_render(request, principal, render_id)
    try:
        return RenderOut.of(await render_service(request).retry(render_id))
    except RequestNotFound:
        raise ApiError(404, "NOT_FOUND", f"no render {render_id}") from None
    except RenderNotRetryable as exc:
        raise ApiError(409, "RENDER_NOT_RETRYABLE", str(exc)) from None
    except RenderDedupeConflict as exc:
        raise ApiError(409, "DEDUPE_CONFLICT", str(exc), extra={"render_id": exc.holder}) from None
    except RenderInputGone as exc:
        raise ApiError(410, "RENDER_INPUT_GONE", str(exc)) from None
    except RenderQueueFull as exc:
        raise queue_full(exc) from None


def event_id(render: RenderRequest) -> int:
    """An SSE id that grows with every state change: the row's `updated_at` in microseconds."""
    return int(render.updated_at.timestamp() * 1_000_000)


@router.get("/v1/renders/{render_id:int}/events", response_class=EventSourceResponse)
async def render_events(
    request: Request,
    render: Annotated[RenderRequest, Depends(render_of_caller)],
    last_event_id: Annotated[str | None, Header()] = None,
) -> AsyncIterator[ServerSentEvent]:
    """The render's state changes as SSE (event type: the status), until it ends.

    Each event's data is the render as `GET /v1/renders/{id}` shows it. Resume with the
    `Last-Event-ID` header: a state seen already is not sent again.
    """
    seen = bounded_id(last_event_id) or 0
    # One reader for every open stream of the node (`RequestFollowers`), not a read per stream.
    states = render_service(request).followers.follow(render.id, render.updated_at)
    current: RenderRequest | None = render
    try:
        while current is not None:
            ident = event_id(current)
            if ident > seen:
                seen = ident
                yield ServerSentEvent(
                    id=str(ident),
                    event=current.status.value,
                    data=RenderOut.of(current).model_dump(mode="json"),
                )
            if current.is_terminal:
                return
            current = await anext(states, None)
    finally:
        await states.aclose()


@renderers_router.get("/v1/jobs/{job_id:int}/artifact", response_class=Response)
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


@renderers_router.get("/v1/renderers", response_model=list[RendererOut])
async def list_renderers(request: Request, principal: Caller) -> list[RendererOut]:
    """Renderers with their slots, occupancy, epoch, state and drain."""
    return [RendererOut(**r) for r in await render_service(request).renderers()]


@renderers_router.post(
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
